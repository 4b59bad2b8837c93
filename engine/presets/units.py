"""Units and the error helper shared by the preset tables."""

GIB = 1024**3
MIB = 1024**2


def unknown(kind: str, value: object, allowed) -> ValueError:
    """The ValueError for a name that is not in a preset table: names the kind, the value and what is allowed."""
    return ValueError(
        f"{kind}: unknown value {value!r}; allowed: {', '.join(allowed)}"
    )

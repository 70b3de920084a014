"""Flat views of resolved configs, to say exactly what one config changes
on another (twins, width and size variants)."""


def flat(obj, prefix: str = '') -> dict:
    """``{'a.b.0.': value}`` for every leaf of nested dicts / sequences."""
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, (list, tuple)):
        items = enumerate(obj)
    else:
        return {prefix: obj}
    out = {}
    for key, value in items:
        out.update(flat(value, f'{prefix}{key}.'))
    return out


def diff(a: dict, b: dict) -> dict:
    """``{flat key: (value in a, value in b)}`` where they differ (None for
    an absent key)."""
    fa, fb = flat(a), flat(b)
    return {
        k: (fa.get(k), fb.get(k))
        for k in set(fa) | set(fb) if fa.get(k) != fb.get(k)
    }

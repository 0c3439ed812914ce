"""The one progress-bar helper: a tqdm bar that is simply disabled when not wanted."""

__all__ = ["progress_bar"]


def progress_bar(total, desc, enabled=True, **kwargs):
    """``tqdm(total=total, desc=desc, disable=not enabled)``: call it unconditionally (a disabled bar does nothing)."""
    from tqdm.auto import tqdm

    kwargs.setdefault("leave", False)
    return tqdm(total=total, desc=desc, disable=not enabled, **kwargs)

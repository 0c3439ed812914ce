"""A sampler as JSON (its class and parameters), as sessions and saved configurations store it."""

from .. import sampling
from ..sampling import Sampler
from .checks import json_safe

__all__ = ["sampler_spec", "sampler_from_spec"]


def sampler_spec(sampler):
    """``{"class", "module", "params"}`` of a faqstats sampler, its parameters as plain JSON."""
    if not isinstance(sampler, (Sampler, sampling.StreamSampler)):
        raise TypeError(f"sampler must be a faqstats Sampler, got {type(sampler).__name__}.")
    notes = []
    params = json_safe(sampler.get_params(deep=False), "sampler", notes)
    if notes:
        raise ValueError(f"sampler parameters must be storable as JSON: {notes[0]}")
    cls = type(sampler)
    # faqstats' own samplers by their public module, whatever file defines them
    module = sampling.__name__ if getattr(sampling, cls.__name__, None) is cls else cls.__module__
    return {"class": cls.__name__, "module": module, "params": params}


def sampler_from_spec(spec, sampler=None):
    """The sampler a :func:`sampler_spec` dict describes: built from it, or ``sampler`` (needed outside
    :mod:`faqstats.sampling`) checked against it."""
    if sampler is not None:
        if (given := sampler_spec(sampler)) != spec:
            raise ValueError(f"The sampler given to load ({given}) is not the session's ({spec}).")
        return sampler
    cls = getattr(sampling, spec["class"], None)
    if spec["module"] != sampling.__name__ or not (isinstance(cls, type) and issubclass(cls, Sampler)):
        raise ValueError(f"The session's sampler is {spec['module']}.{spec['class']}, not one of faqstats.sampling: "
                         f"pass an instance with parameters {spec['params']} as EvaluationSession.load(directory, "
                         "sampler=...).")
    return cls(**spec["params"])

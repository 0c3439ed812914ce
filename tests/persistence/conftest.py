"""Fixtures shared by the persistence (sessions, files, resumption) tests.

``fm``: the planted factor model of the module's own ``bank`` fixture (its true question and model
factors, ``LogisticFactorModel.from_factors``: no fitting, so a module runs in seconds). Each module
keeps its own ``bank``; a module that needs a fitted model defines its own ``fm``, which overrides this one.
"""

import pytest

import faqstats as fq


@pytest.fixture(scope="module")
def fm(bank):
    return fq.LogisticFactorModel.from_factors(bank.question_factors, model_factors=bank.model_factors)

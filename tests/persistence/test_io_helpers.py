"""Small checks of :mod:`faqstats.io` helpers that were doctests: table reading, sampler specs, unsaved reasons."""

import faqstats as fq
from faqstats.io.predictor_arrays import unsaved_reason
from faqstats.io.samplers import sampler_from_spec, sampler_spec
from faqstats.io.tables import read_table


def test_read_table_keeps_string_columns_as_written(tmp_path):
    path = tmp_path / "results.csv"
    path.write_text("model,question,score\nm1,007,1\nm1,2.10,0\n")
    assert read_table(path, columns=["question"])["question"].tolist() == ["007", "2.10"]


def test_sampler_spec_round_trip():
    spec = sampler_spec(fq.HybridSampler(tau=0.25))
    assert (spec["class"], spec["module"]) == ("HybridSampler", "faqstats.sampling")
    assert sampler_from_spec(spec).tau == 0.25


def test_unsaved_reason_none_for_a_factor_model():
    assert unsaved_reason(fq.LogisticFactorModel()) is None

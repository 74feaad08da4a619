import pytest
import torch

from precision.backends import backend_for
from precision.precisions import PrecisionError, parse_precision, parse_precisions


@pytest.mark.parametrize(
    "text,name,bits",
    [("float32", "float32", 24), ("fp64", "float64", 53), ("bf16", "bfloat16", 8),
     ("float16", "float16", 11), ("mp50", "mp50", 169), ("MP30", "mp30", 103)],
)
def test_parse_known_spellings(text, name, bits):
    p = parse_precision(text)
    assert p.name == name
    assert p.bits == bits
    assert p.unit_roundoff == 2.0**-bits


@pytest.mark.parametrize("bad", ["mp0", "float31", "mp", "mp-5", "double128", "", "mp99999"])
def test_unknown_spelling_lists_valid_forms(bad):
    with pytest.raises(PrecisionError) as info:
        parse_precision(bad)
    msg = str(info.value)
    assert "\n" not in msg
    assert "float32" in msg and "mpN" in msg


def test_backend_names_and_dtypes():
    assert parse_precision("float32").backend_name == "torch"
    assert parse_precision("float32").torch_dtype is torch.float32
    assert parse_precision("mp50").backend_name == "mp"
    with pytest.raises(PrecisionError):
        parse_precision("mp50").torch_dtype  # noqa: B018


def test_cast_rounds_into_the_precision():
    third = 1.0 / 3.0
    f32 = backend_for(parse_precision("float32")).asarray([third])
    assert float(f32[0]) == float(torch.tensor(third, dtype=torch.float32))
    mp10 = backend_for(parse_precision("mp10")).asarray([third])
    # mp10 has 37 bits: the rounded value differs from the float64 input by < 2**-37 relative.
    err = abs(float(mp10[0]) - third) / third
    assert 0 < err <= 2.0**-37
    assert parse_precisions("float32, mp50")[1].digits == 50


def test_mxint8_and_the_mx_scale_option_spell_canonically():
    """``mxint8`` is an MX precision (7-bit elements k 2^-6, float32 carrier); ``+scale=``
    is spelled only off its default (``exact``), after ``+act=``, for MX formats only."""
    p = parse_precision("mxint8")
    assert (p.kind, p.bits, p.carrier_name, p.mx_scale) == ("mx", 7, "float32", "exact")
    assert p.element_format.twos_complement and p.element_format.min_finite == -2.0
    assert parse_precision("mxfp8_e4m3+scale=exact") == parse_precision("mxfp8_e4m3")
    assert parse_precision("mxfp8_e4m3+scale=exact").name == "mxfp8_e4m3"
    spelled = {"MXINT8+Scale=LOG2": "mxint8+scale=log2",
               "mxfp4_e2m1:sr+seed=1+scale=log2+act=bfloat16":
                   "mxfp4_e2m1:sr+act=bfloat16+scale=log2+seed=1",
               "mxint8:rz+casts=promote+scale=log2": "mxint8:rz+scale=log2+casts=promote"}
    for text, name in spelled.items():
        q = parse_precision(text)
        assert q.name == name and parse_precision(name) == q and q.mx_scale == "log2"
    for bad, says in (("float32+scale=log2", "MX format"), ("int8+scale=log2", "MX format"),
                      ("mxint8+scale=floor", "unknown MX scale rule"),
                      ("mxint8+scale=log2+scale=exact", "given twice"),
                      ("float32+mod[mlp]=mxint8", "per-module")):
        with pytest.raises(PrecisionError, match=says) as info:
            parse_precision(bad)
        assert "\n" not in str(info.value)

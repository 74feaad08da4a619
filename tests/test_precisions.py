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

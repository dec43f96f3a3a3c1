"""Fuzz inputs for the DLPack import target: fuzz bytes <-> managed-tensor fields.

`decode` turns any byte string into a full `Candidate` (past the end it reads
zeros); `encode` is its inverse, so hand-written cases (`NAMED_SEEDS`) and
random but mostly well-formed ones (`random_candidate`) become byte inputs the
fuzzer can start from and mutate, and that the smoke test replays.
"""

from __future__ import annotations

import dataclasses
import random

from dlpack_ctypes import FLAG_READ_ONLY, KDL_ASCEND, KDL_CPU, KDL_CUDA, KDL_EXT_DEV

MAX_BACKED_NDIM = 256  # larger (or negative) ndim gets NULL shape/strides
DECODED_EXTENTS = 64  # extents/strides read from the input per array; the rest are 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

# Per field: values that tend to break size arithmetic and range checks. The
# first entries are well-formed, so random_candidate can prefer them.
SPECIAL_MAJOR = [1, 0, 2, 0xFFFFFFFF]
SPECIAL_MINOR = [3, 0, 1, 2, 4, 0xFFFFFFFF]
SPECIAL_DEVICE_TYPE = [KDL_CPU, KDL_EXT_DEV, KDL_CUDA, KDL_ASCEND, 0, 3, 4, 5, 13, 14, 18, 99, -1]
SPECIAL_DEVICE_ID = [0, 1, 2, -1, 127, 128, 255, 256, (1 << 31) - 1, -(1 << 31)]
SPECIAL_NDIM = [1, 2, 0, 3, 4, 8, 64, 65, 255, MAX_BACKED_NDIM + 1, -1, -(1 << 31), (1 << 31) - 1]
SPECIAL_DTYPE_CODE = list(range(0, 19)) + [255]
SPECIAL_DTYPE_BITS = [32, 8, 16, 64, 1, 4, 6, 128, 0, 7, 255]
SPECIAL_LANES = [1, 0, 2, 4, 65535]
SPECIAL_EXTENT = [1, 2, 3, 4, 0, 7, -1, -2, 1 << 31, 1 << 32, 1 << 40, 1 << 62, INT64_MAX, INT64_MIN]
SPECIAL_STRIDE = [1, 0, 2, 4, -1, -4, 1 << 31, 1 << 62, INT64_MAX, INT64_MIN]
SPECIAL_BYTE_OFFSET = [0, 4, 8, 64, 1, 2, 3, 1 << 32, 1 << 63, (1 << 64) - 1]

RAW = 224  # selector bytes >= RAW mean "raw value follows", below pick a special


@dataclasses.dataclass(frozen=True)
class Candidate:
    """Every field of one DLManagedTensorVersioned."""

    major: int = 1
    minor: int = 3
    flags: int = 0
    device_type: int = KDL_CPU
    device_id: int = 0
    ndim: int = 1
    dtype: tuple[int, int, int] = (2, 32, 1)  # (code, bits, lanes): float32
    shape: tuple[int, ...] | None = (4,)  # None = NULL pointer
    strides: tuple[int, ...] | None = (1,)
    byte_offset: int = 0
    data: int = 1  # 0 NULL, 1 buffer start, 2 buffer + 1 (misaligned), 3 buffer + 64

    @property
    def arrays_backed(self) -> bool:
        return 0 <= self.ndim <= MAX_BACKED_NDIM


class ByteReader:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def take(self, n: int) -> bytes:
        chunk = self._data[self._pos : self._pos + n]
        self._pos += n
        return chunk.ljust(n, b"\0")

    def uint(self, nbytes: int) -> int:
        return int.from_bytes(self.take(nbytes), "little")

    def field(self, specials: list[int], nbytes: int, signed: bool) -> int:
        selector = self.uint(1)
        if selector < RAW:
            return specials[selector % len(specials)]
        return int.from_bytes(self.take(nbytes), "little", signed=signed)


class ByteWriter:
    def __init__(self) -> None:
        self._out = bytearray()

    def uint(self, value: int, nbytes: int) -> None:
        self._out += value.to_bytes(nbytes, "little")

    def field(self, value: int, specials: list[int], nbytes: int, signed: bool) -> None:
        if value in specials:
            self.uint(specials.index(value), 1)
        else:
            self.uint(RAW, 1)
            self._out += value.to_bytes(nbytes, "little", signed=signed)

    def getvalue(self) -> bytes:
        return bytes(self._out)


# Field order and widths: decode and encode both walk this list.
_SCALAR_FIELDS = [
    ("major", SPECIAL_MAJOR, 4, False),
    ("minor", SPECIAL_MINOR, 4, False),
    ("flags", [0, 1, 2, 4, 7], 8, False),
    ("device_type", SPECIAL_DEVICE_TYPE, 4, True),
    ("device_id", SPECIAL_DEVICE_ID, 4, True),
    ("ndim", SPECIAL_NDIM, 4, True),
]
_DTYPE_FIELDS = [(SPECIAL_DTYPE_CODE, 1), (SPECIAL_DTYPE_BITS, 1), (SPECIAL_LANES, 2)]
_SHAPE_NULL, _STRIDES_NULL = 1, 2  # bits of the array-mode byte


def decode(data: bytes) -> Candidate:
    r = ByteReader(data)
    scalars = {name: r.field(sp, n, signed) for name, sp, n, signed in _SCALAR_FIELDS}
    dtype = tuple(r.field(sp, n, signed=False) for sp, n in _DTYPE_FIELDS)
    array_mode = r.uint(1)
    ndim = scalars["ndim"]
    length = ndim if 0 <= ndim <= MAX_BACKED_NDIM else 0
    decoded = min(length, DECODED_EXTENTS)
    shape = [r.field(SPECIAL_EXTENT, 8, signed=True) for _ in range(decoded)] + [1] * (length - decoded)
    strides = [r.field(SPECIAL_STRIDE, 8, signed=True) for _ in range(decoded)]
    strides += [1] * (length - decoded)
    backed = 0 <= ndim <= MAX_BACKED_NDIM
    byte_offset = r.field(SPECIAL_BYTE_OFFSET, 8, signed=False)
    data_choice = r.uint(1) % 4
    return Candidate(
        **scalars,
        dtype=dtype,  # type: ignore[arg-type]
        shape=tuple(shape) if backed and not array_mode & _SHAPE_NULL else None,
        strides=tuple(strides) if backed and not array_mode & _STRIDES_NULL else None,
        byte_offset=byte_offset,
        data=data_choice,
    )


def encode(c: Candidate) -> bytes:
    """The bytes `decode` turns into `c`. Arrays must be as long as ndim says
    (or None); extents past DECODED_EXTENTS must be 1, as decode fills them."""
    w = ByteWriter()
    for name, specials, nbytes, signed in _SCALAR_FIELDS:
        w.field(getattr(c, name), specials, nbytes, signed)
    for value, (specials, nbytes) in zip(c.dtype, _DTYPE_FIELDS):
        w.field(value, specials, nbytes, signed=False)
    w.uint((_SHAPE_NULL if c.shape is None else 0) | (_STRIDES_NULL if c.strides is None else 0), 1)
    length = c.ndim if c.arrays_backed else 0
    shape = c.shape if c.shape is not None else (1,) * length
    strides = c.strides if c.strides is not None else (1,) * length
    if len(shape) != length or len(strides) != length:
        raise ValueError(f"shape/strides must have ndim={c.ndim} entries or be None: {c}")
    for values, specials in ((shape, SPECIAL_EXTENT), (strides, SPECIAL_STRIDE)):
        if any(v != 1 for v in values[DECODED_EXTENTS:]):
            raise ValueError(f"entries past {DECODED_EXTENTS} must be 1: {c}")
        for v in values[:DECODED_EXTENTS]:
            w.field(v, specials, 8, signed=True)
    w.field(c.byte_offset, SPECIAL_BYTE_OFFSET, 8, signed=False)
    w.uint(c.data, 1)
    return w.getvalue()


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides, wrapped to int64 as a C producer's arithmetic would."""
    strides, running = [], 1
    for extent in reversed(shape):
        strides.append((running + (1 << 63)) % (1 << 64) - (1 << 63))
        running *= max(extent, 1)
    return tuple(reversed(strides))


def random_candidate(rng: random.Random, device_types: tuple[int, ...] = (KDL_CPU, KDL_EXT_DEV)) -> Candidate:
    """Mostly well-formed (each field is valid about 85% of the time), so that
    random inputs reach the success path as well as every rejection."""

    def mostly(valid, specials: list[int]):
        return valid() if rng.random() < 0.85 else rng.choice(specials)

    ndim = mostly(lambda: rng.randint(0, 4), SPECIAL_NDIM)
    shape = strides = None
    if 0 <= ndim <= MAX_BACKED_NDIM:
        # decode fills entries past DECODED_EXTENTS with 1: keep them 1 here.
        def array(valid, specials):
            return tuple(mostly(valid, specials) if i < DECODED_EXTENTS else 1 for i in range(ndim))

        shape = array(lambda: rng.randint(0, 5), SPECIAL_EXTENT)
        if rng.random() < 0.7:
            strides = _contiguous_strides(shape[:DECODED_EXTENTS]) + (1,) * max(ndim - DECODED_EXTENTS, 0)
        else:
            strides = array(lambda: rng.randint(-3, 8), SPECIAL_STRIDE)
        if rng.random() < 0.05:
            shape = None
        if rng.random() < 0.05:
            strides = None
    return Candidate(
        major=mostly(lambda: 1, SPECIAL_MAJOR),
        minor=mostly(lambda: rng.choice([0, 1, 2, 3]), SPECIAL_MINOR),
        flags=mostly(lambda: 0, [FLAG_READ_ONLY, 2, 4, 7]),
        device_type=mostly(lambda: rng.choice(device_types), SPECIAL_DEVICE_TYPE),
        device_id=mostly(lambda: rng.choice([0, 1]), SPECIAL_DEVICE_ID),
        ndim=ndim,
        dtype=mostly(lambda: rng.choice(WELL_FORMED_DTYPES), [(2, 7, 1), (2, 32, 2), (0, 0, 1), (255, 8, 1)]),
        shape=shape,
        strides=strides,
        byte_offset=mostly(lambda: rng.choice([0, 0, 0, 8, 64]), SPECIAL_BYTE_OFFSET),
        data=mostly(lambda: rng.choice([1, 3]), [0, 2]),
    )


# (code, bits, lanes) torch can represent.
WELL_FORMED_DTYPES = [(2, 32, 1), (2, 16, 1), (2, 64, 1), (0, 8, 1), (0, 32, 1), (0, 64, 1),
                      (1, 8, 1), (4, 16, 1), (5, 64, 1), (6, 8, 1), (10, 8, 1)]  # fmt: skip

# Hand-written cases: the well-formed paths plus every kind of malformed field
# a producer could send. Names are the smoke test's ids.
NAMED_SEEDS: dict[str, Candidate] = {
    "cpu_float32_vector": Candidate(),
    "simdev0_float32_matrix": Candidate(device_type=KDL_EXT_DEV, ndim=2, shape=(2, 3), strides=(3, 1)),
    "simdev1_float32_vector": Candidate(device_type=KDL_EXT_DEV, device_id=1),
    "cpu_scalar_null_arrays": Candidate(ndim=0, shape=None, strides=None),
    "cpu_transposed_strides": Candidate(ndim=2, shape=(3, 2), strides=(1, 3)),
    "cpu_zero_size_null_data": Candidate(ndim=2, shape=(0, 4), strides=(4, 1), data=0),
    "cpu_byte_offset_aligned": Candidate(byte_offset=8),
    "cpu_read_only_flag": Candidate(flags=FLAG_READ_ONLY),
    "cpu_null_strides_v1_1_compact": Candidate(ndim=2, shape=(2, 2), strides=None, minor=1),
    "major_2_must_be_rejected": Candidate(major=2),
    "major_0_must_be_rejected": Candidate(major=0),
    "null_shape_with_ndim_2": Candidate(ndim=2, shape=None, strides=(2, 1)),
    "negative_ndim": Candidate(ndim=-1, shape=None, strides=None),
    "huge_ndim_null_arrays": Candidate(ndim=(1 << 31) - 1, shape=None, strides=None),
    "ndim_257_null_arrays": Candidate(ndim=MAX_BACKED_NDIM + 1, shape=None, strides=None),
    "negative_extent": Candidate(shape=(-1,)),
    "storage_size_overflow": Candidate(ndim=2, shape=(1 << 62, 1 << 62), strides=(1, 1)),
    "extent_int64_min": Candidate(shape=(INT64_MIN,)),
    "byte_offset_not_element_multiple": Candidate(byte_offset=3),
    "byte_offset_huge": Candidate(byte_offset=1 << 63),
    # Found by the fuzzer: storage_offset + 1 wrapped to 0, so the span check passed and torch's own
    # (noexcept) storage size check terminated the process.
    "byte_offset_max_wraps_offset_plus_one": Candidate(dtype=(6, 8, 1), shape=(2,), strides=(INT64_MAX,),
                                                       byte_offset=(1 << 64) - 1),
    "byte_offset_max_empty": Candidate(ndim=2, shape=(0, 4), strides=(4, 1), byte_offset=(1 << 64) - 4),
    "unknown_device_type_99": Candidate(device_type=99),
    "negative_device_type": Candidate(device_type=-1),
    "opencl_device_type": Candidate(device_type=4),
    "cuda_device_on_this_build": Candidate(device_type=KDL_CUDA),
    "ascend_device_type_21": Candidate(device_type=KDL_ASCEND),
    "extdev_negative_device_id": Candidate(device_type=KDL_EXT_DEV, device_id=-1),
    "extdev_device_id_256_wraps_int8": Candidate(device_type=KDL_EXT_DEV, device_id=256),
    "extdev_device_id_past_count": Candidate(device_type=KDL_EXT_DEV, device_id=2),
    "float_bits_7": Candidate(dtype=(2, 7, 1)),
    "float32_two_lanes": Candidate(dtype=(2, 32, 2)),
    "zero_lanes": Candidate(dtype=(2, 32, 0)),
    "unknown_dtype_code_255": Candidate(dtype=(255, 8, 1)),
    "float4_packed_subbyte": Candidate(dtype=(17, 4, 1), flags=0),
    "float4_padded_subbyte": Candidate(dtype=(17, 4, 1), flags=4),
    "bool_bits_1": Candidate(dtype=(6, 1, 1)),
    "float8_e4m3fn": Candidate(dtype=(10, 8, 1), data=2),
}
assert all(decode(encode(c)) == c for c in NAMED_SEEDS.values()), "encode/decode disagree"


def smoke_corpus() -> list[tuple[str, bytes]]:
    """The fixed corpus CI replays (tests/python/test_fuzz_smoke.py): every
    named case, 200 mostly well-formed random inputs, 100 raw random byte
    strings; labels are "named:<name>", "well_formed:<i>", "raw:<i>"."""
    corpus = [(f"named:{name}", encode(c)) for name, c in NAMED_SEEDS.items()]
    rng = random.Random(20261129)
    corpus += [(f"well_formed:{i}", encode(random_candidate(rng))) for i in range(200)]
    rng = random.Random(4242)
    corpus += [(f"raw:{i}", rng.randbytes(rng.randrange(0, 160))) for i in range(100)]
    return corpus

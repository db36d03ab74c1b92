#!/usr/bin/python3
# make-h3-seeds.py - writes the h3- seeds of fuzz-pickle and fuzz-ptzip
# (tests/fuzz/corpus/{pickle,ptzip}/h3-*): the [hostile3] reader cases,
# which tests/cli/t0555-hostile3-readers.t also runs through the tools.
# No torch needed: the archive is fixtures/make-bad-pt.py's ok.pt (a 2x3
# float32 w = [[1, -2, 3], [-4, 5, -6]]), its pickle framed as protocol
# 4 frames it, then broken in one way each; the same bytes on every run.
#
#   frame-ok         two frames, each its opcodes' exact length: read
#   frame-short      the frame ends before SETITEMS and STOP (left unframed)
#   frame-cross      the frame ends inside an opcode
#   frame-zero       a FRAME of 0 bytes before the opcodes
#   frame-long       the first frame's length runs into the second FRAME
#   crc0-deflated    data.pkl deflated, CRC 0 in both headers, w renamed v
#   crc-storage      data/0 with one bit flipped, its CRC the old bytes'
#   crc-storage-t    the same, w read as a transposed view (w.t().t())
#   crc-pkl-stored   data.pkl stored, its CRC (both headers) off by one
#
#   python3 tests/fuzz/make-h3-seeds.py     (from the top of the tree)
import importlib.util
import io
import os
import pickletools
import struct
import zipfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.join(HERE, "corpus")
spec = importlib.util.spec_from_file_location(
    "make_bad_pt", os.path.join(HERE, "..", "..", "fixtures", "make-bad-pt.py"))
bad = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bad)


def put(target, name, data):
    d = os.path.join(TOP, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "h3-" + name), "wb") as f:
        f.write(data)


def frame(n):
    return b"\x95" + struct.pack("<Q", n)


def archive(pkl, storage=bad.W_DATA, deflated=False):
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as z:
        for name, data in (("archive/data.pkl", pkl), ("archive/data/0", storage),
                           ("archive/version", b"3\n")):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            if deflated and name.endswith(".pkl"):
                info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return bytearray(b.getvalue())


def set_crc(z, name, crc):
    """record name's CRC-32 in its local header and in the central directory"""
    for sig, field, at_name in ((b"PK\x03\x04", 14, 30), (b"PK\x01\x02", 16, 46)):
        i = z.find(sig)
        while i >= 0 and z[i + at_name:i + at_name + len(name)] != name:
            i = z.find(sig, i + 4)
        struct.pack_into("<I", z, i + field, crc)


def seed(name, pkl, **kw):
    put("pickle", name + ".pkl", pkl)
    put("ptzip", name + ".pt", bytes(archive(pkl, **kw)))


def main():
    body = bad.state_dict([("w", bad.W)])[2:]          # the opcodes after PROTO 2
    starts = [pos for _, _, pos in pickletools.genops(b"\x80\x02" + body)]
    starts = [p - 2 for p in starts[1:]] + [len(body)]  # opcode offsets in body
    # an opcode boundary half way, before an opcode of more than one byte
    cut = next(a for a, b in zip(starts, starts[1:]) if a >= len(body) // 2 and b - a > 1)
    p4 = b"\x80\x04"
    seed("frame-ok", p4 + frame(cut) + body[:cut] + frame(len(body) - cut) + body[cut:])
    last = starts[-3]                                   # SETITEMS and STOP ...
    seed("frame-short", p4 + frame(last) + body)        # ... left out of the frame
    seed("frame-cross", p4 + frame(cut + 1) + body)
    seed("frame-zero", p4 + frame(0) + body)
    seed("frame-long", p4 + frame(cut + 4) + body[:cut] + frame(len(body) - cut) + body[cut:])
    pkl = bad.state_dict([("w", bad.W)])
    z = archive(pkl.replace(bad.uni("w"), bad.uni("v")), deflated=True)
    set_crc(z, b"archive/data.pkl", 0)
    put("ptzip", "crc0-deflated.pt", bytes(z))
    flipped = bytes([bad.W_DATA[0] ^ 1]) + bad.W_DATA[1:]
    z = archive(pkl, storage=flipped)
    set_crc(z, b"archive/data/0", zlib.crc32(bad.W_DATA))
    put("ptzip", "crc-storage.pt", bytes(z))
    # w stored as the transpose of a 3x2 view of the storage: strides (1, 2)
    t = bad.state_dict([("w", bad.tensor("0", 6, 0, [2, 3], [1, 2]))])
    z = archive(t, storage=flipped)
    set_crc(z, b"archive/data/0", zlib.crc32(bad.W_DATA))
    put("ptzip", "crc-storage-t.pt", bytes(z))
    z = archive(pkl)
    set_crc(z, b"archive/data.pkl", (zlib.crc32(pkl) + 1) & 0xffffffff)
    put("ptzip", "crc-pkl-stored.pt", bytes(z))


if __name__ == "__main__":
    main()

"""Checks every ELF file of an installed stallscope tree (tests/node/inside.sh): each needs only
glibc's own libraries (what a bare node has; no GUI library, no OpenCV, no libstdc++ of the build
machine), and each resolves here (`ld.so --list` finds every library it needs).
    python3 elf_check.py TREE
Prints one line per file; exits 1 naming the first offence."""

import os
import struct
import subprocess
import sys

ALLOWED = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libgcc_s.so.1",
           "ld-linux-x86-64.so.2"}
LDSO = "/lib64/ld-linux-x86-64.so.2"


def needed(path):
    """DT_NEEDED of a 64-bit little-endian ELF file, or None if it is not one."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    out = []
    for _name, stype, _flags, _addr, off, size, link, _info, _align, entsize in sections:
        if stype != 6:  # SHT_DYNAMIC
            continue
        strtab = sections[link]
        for i in range(size // entsize):
            tag, val = struct.unpack_from("<qQ", data, off + i * entsize)
            if tag == 0:
                break
            if tag == 1:  # DT_NEEDED
                s = strtab[4] + val
                out.append(data[s:data.index(b"\0", s)].decode())
    return out


def main():
    tree = sys.argv[1]
    count = 0
    for d, _dirs, files in os.walk(tree):
        for name in sorted(files):
            path = os.path.join(d, name)
            libs = needed(path)
            if libs is None:
                continue
            count += 1
            bad = [lib for lib in libs if lib not in ALLOWED]
            if bad:
                sys.exit(f"{path} needs {', '.join(bad)}")
            listed = subprocess.run([LDSO, "--list", path], capture_output=True, text=True)
            if listed.returncode != 0 or "not found" in listed.stdout:
                sys.exit(f"{path} does not resolve here: {listed.stdout}{listed.stderr}")
            print(f"{os.path.relpath(path, tree)}: {' '.join(libs)}")
    if count < 4:
        sys.exit(f"only {count} ELF files under {tree}: the executables and modules are missing")


if __name__ == "__main__":
    main()

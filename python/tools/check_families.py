"""Fails unless every test_*.py under TESTS_DIR (dask/ aside: its own ctest test) is named by
exactly one ctest family: usage check_families.py TESTS_DIR NAME... (python/CMakeLists.txt)."""
import collections
import pathlib
import sys


def main() -> int:
    tests_dir, names = pathlib.Path(sys.argv[1]), sys.argv[2:]
    files = {p.stem for p in tests_dir.glob("test_*.py")}
    counts = collections.Counter(names)
    problems = [f"{f}.py is in no family" for f in sorted(files - counts.keys())]
    problems += [f"{n}.py is in {c} families" for n, c in sorted(counts.items()) if c > 1]
    problems += [f"{n}.py is named by a family but does not exist" for n in sorted(counts.keys() - files)]
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

"""Command line: ``python -m gpucourse doctor`` (setup), ``selftest`` (GPU), ``record``, ``grade`` (your score)."""

from __future__ import annotations

import argparse
import sys

from gpucourse import diagnostics, grade, record


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run the chosen check; return the exit status."""
    parser = argparse.ArgumentParser(prog="python -m gpucourse", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    doctor = sub.add_parser("doctor", help="print the environment report and measure this machine")
    doctor.add_argument("--quick", action="store_true", help="smaller measurements (a few seconds)")
    sub.add_parser("selftest", help="check that the GPU path works (skips GPU checks without a GPU)")
    record_parser = sub.add_parser("record", help="run the course's measurement suite and write one JSON record")
    record.add_arguments(record_parser)
    grade_parser = sub.add_parser("grade", help="grade your copies in work/ with the full tests (hidden ones too)")
    grade.add_arguments(grade_parser)
    args = parser.parse_args(argv)
    if args.command == "grade":
        return grade.run(args)
    if args.command == "record":
        return record.run(args)
    if args.command == "doctor":
        print(diagnostics.doctor(quick=args.quick))
        return 0
    results = diagnostics.selftest()
    for result in results:
        print(result)
    return 1 if any(r.status == "FAIL" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())

"""A Sample Factory run's saved config.json -> an experiment preset of ours.

    python -m sf_hydra.app.import_sf_config train_dir/my_run/config.json --out conf/experiments/my_run.yaml
    python train.py +experiment=my_run

The preset (`# @package _global_`) picks the env config (`override /env: ...`) and holds only
the values that differ from our defaults for that env; flags that ask for nothing here
(Sample Factory's defaults of replaced mechanisms, the run's train_dir) are listed on stderr.
A preset outside conf/ is found with `'hydra.searchpath=[file://<folder above experiments/>]'`.
`--format overrides` prints the same as a `python train.py ...` command line instead.
Exit status 2, naming each flag, when the config has flags that cannot be honoured here.
The logic: sf_hydra.app.sample_factory.translate (the table: sf_hydra.app.sample_factory.flags).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import List, Optional

from sf_hydra.app.sample_factory.translate import import_config, preset_yaml
from sf_hydra.config.location import find_configs
from sf_hydra.core.errors import ConfigError
from sf_hydra.core.faults import EXIT_BAD_CONFIG
from sf_hydra.core.files import write_atomically


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sf_hydra.app.import_sf_config", description=__doc__.split("\n")[0])
    parser.add_argument("config", type=Path, help="a Sample Factory run's config.json")
    parser.add_argument("--out", type=Path, help="the preset to write (default: stdout), e.g. "
                        "conf/experiments/<name>.yaml")
    parser.add_argument("--format", choices=("preset", "overrides"), default="preset",
                        help="an experiment preset (yaml) or a python train.py command line")
    args = parser.parse_args(argv)

    try:
        sf_cfg = json.loads(args.config.read_text())
        imported = import_config(sf_cfg, find_configs()[1])
    except (OSError, json.JSONDecodeError) as e:
        print(f"{args.config}: {e}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    except ConfigError as e:
        print(f"bad config: {e}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    for note in imported.dropped:
        print(f"note: {note}", file=sys.stderr)
    if args.format == "overrides":
        text = "python train.py " + shlex.join(imported.overrides()) + "\n"
    else:
        text = preset_yaml(imported, str(args.config))
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(args.out, lambda tmp: tmp.write_text(text))
        print(f"wrote {args.out}: python train.py +experiment={args.out.stem}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

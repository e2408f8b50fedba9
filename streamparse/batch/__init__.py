"""The batch path: many finished outputs parsed at once, each row exactly `parse()`.

| module | job |
|---|---|
| `rows.py` | one row: a text parsed with checked options, and its four result columns |
| `workers.py` | `ordered_map`: chunks of items on every core, results in input order, capped by cores and work |
| `pool.py` | the worker processes: one socket each, driven from the caller's thread; a worker's error raised here |
| `many.py` | `parse_many` / `iter_parse_many`: a list of texts in, `Message`s out |
| `columns.py` | `parse_batch` / `ParseBatch`: Arrow tables, pandas frames, dicts of columns (Ray Data, `datasets`) |
| `files.py` | `streamparse parse --jsonl` / `--parquet` |

The core never imports this package; `streamparse.parse_many` is exported from it on first use.
"""

from .columns import ParseBatch, parse_batch
from .many import iter_parse_many, parse_many
from .rows import RESULT_COLUMNS

__all__ = ["RESULT_COLUMNS", "ParseBatch", "iter_parse_many", "parse_batch", "parse_many"]

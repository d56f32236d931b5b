"""The suite's tools over a run's reports directory: `python -m e2e.tools.diff BASE NEW` (what
changed between two runs), `python -m e2e.tools.merge SHARD_DIR... -o DIR` (one run's reports
from its shards), `python -m e2e.tools.support` (docs/support.md from the OpInfo sweep), and
`report_tables` (the tables suites add to a run's HTML report)."""

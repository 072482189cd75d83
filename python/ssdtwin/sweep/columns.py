"""The columns of a sweep's table and their Arrow types (docs/sweep.md, "Columns")."""

from __future__ import annotations

# Output columns and their Arrow types; inputs come first (input_columns).
OUTPUT_COLUMNS: dict[str, str] = {
    "namespace_bytes": "int64",  # at the point's scale
    "namespace_tb_full": "float64",  # the same fraction of the full-scale drive, in TB
    "op": "float64",  # data pool / namespace - 1 (NAND not in the namespace is spare)
    "model_waf": "float64",  # greedy GC closed form (Lambert W) at that OP
    "steady_waf": "float64",  # precondition "rand": WAF of its last 4 KiB random pass (fast-forward)
    "steady_waf_host_bytes": "int64",  # what that pass wrote (one namespace)
    "steady_waf_gc_cycles": "float64",  # superblocks GC reclaimed in it / superblocks
    "steady_waf_verdict": "string",  # steady or insufficient (docs/models.md, "Measuring WAF")
    "steady_waf_is_jobs": "bool_",  # the job writes like that pass (uniform random, same block)
    "iops": "float64",
    "read_iops": "float64",
    "write_iops": "float64",
    "read_mb_s": "float64",
    "write_mb_s": "float64",
    "read_lat_mean_us": "float64",
    "write_lat_mean_us": "float64",
    "read_p50_us": "float64",
    "read_p99_us": "float64",
    "read_p999_us": "float64",
    "write_p50_us": "float64",
    "write_p99_us": "float64",
    "write_p999_us": "float64",
    "p99_us": "float64",  # reads and writes together
    "p999_us": "float64",
    "read_ios": "int64",
    "write_ios": "int64",
    "read_bytes": "int64",
    "write_bytes": "int64",
    "waf": "float64",  # NAND / host bytes written during the job, when the window is steady; else null
    "waf_window_raw": "float64",  # the same ratio whatever the window spans
    "waf_verdict": "string",  # steady, insufficient or no_writes (docs/models.md, "Measuring WAF")
    "waf_gc_cycles": "float64",  # superblocks GC reclaimed in the window / superblocks
    "host_write_bytes": "int64",
    "nand_write_bytes": "int64",
    "simulated_s": "float64",
    "status": "string",  # ok or failed
    "error": "string",
    "ssdtwin_version": "string",
    "core_build": "string",  # a hash of the compiled core, as the image cache records it
    "preset_digest": "string",  # a hash of the preset's parameter values, as the image cache records it
}
INPUT_TYPES: dict[str, str] = {
    "point_id": "string",
    "seed": "int64",
    "image_seed": "int64",
    "preset": "string",
    "scale": "int64",
    "namespace_tb": "float64",
    "namespace_fraction": "float64",
    "extra_op": "float64",
    "precondition": "string",
    "job": "string",
    "runtime": "string",
    "ramp_time": "string",
    "rate_iops": "int64",
}

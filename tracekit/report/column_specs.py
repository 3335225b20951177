"""The tables the report formats show (columns, headers, units, number formats): each
is a spec, a list of (column of the table it shows, header, format) in display order;
format is a ``str.format`` pattern, or "ms"/"ms3" for µs shown as ms with 2/3
decimals. tracekit.report.draw.headline draws a table from its spec."""

# (column in Analysis.runs, header shown, format)
HEADLINE = [
    ("run", "run", "{}"),
    ("rank", "rank", "{:.0f}"),
    ("source", "trace", "{}"),
    ("status", "status", "{}"),
    ("device_type", "device", "{}"),
    ("iterations", "iters", "{:.0f}"),
    ("kernels", "kernels", "{:.0f}"),
    ("host_launches", "launches", "{:.0f}"),
    ("gpu_busy_us", "GPU busy (ms)", "ms"),
    ("active_span_us", "span (ms)", "ms"),
    ("utilization", "util", "{:.2f}"),
    ("idle_gaps", "idle gaps", "{:.0f}"),
    ("mean_kernel_us", "mean kernel (µs)", "{:.1f}"),
    ("iteration_ms", "profiled iter (ms)", "{:.3f}"),
    ("cpu_op_busy_per_iter_us", "CPU ops/iter (ms)", "ms3"),
    ("latency_median_ms", "latency p50 (ms)", "{:.3f}"),
    ("compile_s", "first call (s)", "{:.2f}"),
    ("verdict", "verdict", "{}"),
]

# The idle-time table: where the GPU's idle time went, and what a CUDA graph could recover.
IDLE = [
    ("run", "run", "{}"),
    ("rank", "rank", "{:.0f}"),
    ("verdict", "verdict", "{}"),
    ("utilization", "util", "{:.2f}"),
    ("idle_host_wait_share", "host wait", "{:.1%}"),
    ("idle_launch_latency_share", "launch latency", "{:.1%}"),
    ("idle_sync_share", "sync", "{:.1%}"),
    ("idle_other_share", "other idle", "{:.1%}"),
    ("cuda_graphs_saving_ms", "CUDA graphs could save (ms/iter, predicted)", "{:.3f}"),
    ("cuda_graph_recoverable_us_per_iter", "host wait (ms/iter, uncalibrated bound)", "ms3"),
    ("launch_latency_p50_us", "launch→start p50 (µs)", "{:.1f}"),
    ("feed_ratio", "feed ratio", "{:.2f}"),
    ("short_kernel_share", "kernels <10µs", "{:.0%}"),
    ("unprofiled_utilization", "unprofiled util", "{:.2f}"),
]

# The critical path of each run (tracekit analyze --critical-path): the modelled iteration and the
# share of each part of its path, calibrated to the unprofiled latency where run.json has it.
CRITICAL_PATH = [
    ("run", "run", "{}"),
    ("rank", "rank", "{:.0f}"),
    ("cp_calibrated", "calibrated", "{}"),
    ("cp_latency_us", "modelled iter (ms)", "ms3"),
    ("cp_cpu_share", "host CPU", "{:.0%}"),
    ("cp_launch_share", "launch calls", "{:.0%}"),
    ("cp_launch_latency_share", "launch latency", "{:.0%}"),
    ("cp_gpu_gap_share", "GPU gaps", "{:.0%}"),
    ("cp_kernel_share", "kernels", "{:.0%}"),
    ("cp_transfer_share", "transfers", "{:.0%}"),
    ("cp_comm_share", "comm", "{:.0%}"),
    ("cp_sync_share", "sync", "{:.0%}"),
    ("cp_stream_wait_share", "stream waits", "{:.0%}"),
    ("cp_rank_wait_share", "other ranks", "{:.0%}"),
    ("cuda_graphs_predicted_ms", "CUDA graphs, predicted (ms)", "{:.3f}"),
    ("cp_host_scale", "host time ×", "{:.2f}"),
]
CRITICAL_PATH_TEXT = ("Each iteration's critical path: the longest chain of dependent host and GPU work "
                      "(host threads in order, launch → GPU op, stream order, cross-stream waits, syncs, "
                      "collectives across ranks), its share of each part; calibrated: host time scaled so that "
                      "the modelled iteration equals the unprofiled latency (run.json). CUDA graphs, predicted: "
                      "the iteration re-timed as one graph replay (`tracekit whatif RUN --cuda-graphs`).")

# The comparison (tracekit.analysis.comparison.compare): how much faster than the baseline, and why.
SPEEDUP = [
    ("workload", "workload", "{}"),
    ("mode", "mode", "{}"),
    ("ran_on", "ran on", "{}"),
    ("latency_median_ms", "latency p50 (ms)", "{:.3f}"),
    ("speedup_range", "speedup (p10-p90 range)", "{}"),
    ("d_latency_ms", "Δ latency (ms)", "{:+.3f}"),
    ("d_busy_per_iter_ms", "Δ GPU busy (ms/iter)", "{:+.3f}"),
    ("d_idle_est_ms", "Δ idle (ms/iter)", "{:+.3f}"),
    ("dominant", "dominates", "{}"),
    ("kernels_ratio", "kernels ×", "{:.2f}"),
    ("launches_ratio", "launches ×", "{:.3f}"),
]

# The same split measured inside the profiled window, with idle time by cause.
PROFILED = [
    ("workload", "workload", "{}"),
    ("mode", "mode", "{}"),
    ("profiled_iter_ms", "profiled iter (ms)", "{:.3f}"),
    ("busy_per_iter_ms", "GPU busy (ms/iter)", "{:.3f}"),
    ("idle_per_iter_ms", "idle (ms/iter)", "{:.3f}"),
    ("idle_host_wait_per_iter_ms", "host wait", "{:.3f}"),
    ("idle_launch_latency_per_iter_ms", "launch latency", "{:.3f}"),
    ("idle_sync_per_iter_ms", "sync", "{:.3f}"),
    ("idle_other_per_iter_ms", "other", "{:.3f}"),
    ("d_profiled_iter_ms", "Δ profiled iter (ms)", "{:+.3f}"),
    ("d_busy_per_iter_ms", "Δ busy", "{:+.3f}"),
    ("d_idle_per_iter_ms", "Δ idle", "{:+.3f}"),
    ("d_idle_host_wait_per_iter_ms", "Δ host wait", "{:+.3f}"),
    ("d_rest_per_iter_ms", "Δ rest", "{:+.3f}"),
    ("dominant_profiled", "profiled says", "{}"),
]

# What else changed: work per iteration, compile time, memory, accuracy.
DETAILS = [
    ("workload", "workload", "{}"),
    ("mode", "mode", "{}"),
    ("status", "status", "{}"),
    ("kernels_per_iter", "kernels/iter", "{:.1f}"),
    ("launches_per_iter", "launches/iter", "{:.1f}"),
    ("compile_s", "compile + first call (s)", "{:.2f}"),
    ("peak_memory_MB", "peak memory (MB)", "{:.1f}"),
    ("max_abs_diff", "max abs diff vs eager", "{:.2e}"),
    ("utilization", "GPU util (profiled)", "{:.2f}"),
    ("cpu_op_per_iter_ms", "CPU ops (ms/iter, profiled)", "{:.3f}"),
    ("cpu_ops_per_iter", "op calls/iter", "{:.0f}"),
]

# Decode runs (phase decode): their figures per token, a decode step making one token of each sequence
# (tracekit.report.decode_text.DECODE_TEXT says what each is).
DECODE = [
    ("workload", "workload", "{}"),
    ("mode", "mode", "{}"),
    ("latency_median_ms", "ms/token p50", "{:.3f}"),
    ("latency_range", "ms/token p10-p90", "{}"),
    ("tokens_per_s", "tokens/s", "{:,.0f}"),
    ("tokens_per_step", "tokens/step", "{:.0f}"),
    ("prompt_tokens", "prompt", "{:.0f}"),
    ("prefill_ms", "prefill (ms)", "{:.2f}"),
    ("kv_cache_MB", "KV cache (MB)", "{:.1f}"),
    ("kernels_per_iter", "kernels/token", "{:.1f}"),
    ("launches_per_iter", "launches/token", "{:.1f}"),
    ("busy_per_iter_ms", "GPU busy (ms/token)", "{:.3f}"),
    ("idle_est_ms", "idle (ms/token)", "{:.3f}"),
]

# How far each run's timing can be trusted (tracekit.capture.timers, tracekit.analysis.comparison.trust).
TIMING = [
    ("workload", "workload", "{}"),
    ("mode", "mode", "{}"),
    ("latency_median_ms", "latency p50 (ms)", "{:.3f}"),
    ("latency_range", "latency p10-p90 (ms)", "{}"),
    ("wall_median_ms", "synchronised wall clock p50 (ms)", "{:.3f}"),
    ("wall_range", "wall clock p10-p90 (ms)", "{}"),
    ("timer_agreement", "timers apart", "{:+.1%}"),
    ("timer_gap", "why apart", "{}"),
    ("processes", "processes", "{:.0f}"),
    ("process_spread", "spread across processes", "{:.1%}"),
    ("threads", "CPU threads", "{:.0f}"),
    ("timing_warning", "doubts", "{}"),
]

# CPU-only runs: what changed op by op against the baseline (tracekit.analysis.metrics.cpu_ops.changes).
CPU_OPS = [
    ("workload", "workload", "{}"),
    ("mode", "mode", "{}"),
    ("op", "op", "{}"),
    ("baseline_calls_per_iter", "calls/iter (baseline)", "{:.0f}"),
    ("calls_per_iter", "calls/iter", "{:.0f}"),
    ("baseline_self_per_iter_ms", "self (baseline, ms/iter)", "{:.3f}"),
    ("self_per_iter_ms", "self (ms/iter)", "{:.3f}"),
    ("d_self_per_iter_ms", "Δ self (ms/iter)", "{:+.3f}"),
]
CPU_OPS_SHOWN = 8  # ops per run in the reports' table (all of them are in runs.json)

# Figures that exist only where there is GPU activity: "n/a" in a CPU-only run's row, not 0.
GPU_ONLY = {"kernels", "host_launches", "gpu_busy_us", "active_span_us", "utilization", "idle_gaps",
            "mean_kernel_us", "kernels_ratio", "launches_ratio", "kernels_per_iter", "launches_per_iter",
            "d_busy_per_iter_ms", "d_idle_est_ms", "verdict"}

# Profiler overhead: profiled vs unprofiled iteration time of each run.
OVERHEAD = [
    ("run", "run", "{}"),
    ("latency_timer", "unprofiled timer", "{}"),
    ("latency_median_ms", "unprofiled p50 (ms)", "{:.3f}"),
    ("profiled_iter_ms", "profiled iter (ms)", "{:.3f}"),
    ("gpu_span_per_iter_ms", "GPU span/iter (ms)", "{:.3f}"),
    ("profiler_overhead", "profiler overhead", "{:+.0%}"),
    ("flag", "flag", "{}"),
]


# Distributed jobs (tracekit.analysis.distributed.job): the jobs, their ranks, balance and stragglers.
JOBS = [
    ("job", "job", "{}"),
    ("ranks", "ranks", "{:.0f}"),
    ("backend", "backend", "{}"),
    ("verdict", "verdict", "{}"),
    ("comm_comp_overlap_median", "comm-comp overlap p50", "{:.0%}"),
    ("collectives_matched", "collectives matched", "{:.0f}"),
    ("ranks_missing", "ranks missing", "{}"),
    ("straggler", "straggler", "{:.0f}"),
    ("straggler_wait_caused_us", "wait it caused (ms, profiled)", "ms3"),
    ("straggler_excess_ms", "its excess work (ms/step)", "{:.3f}"),
    ("noise_ms", "step noise p10-p90 (ms)", "{:.3f}"),
    ("balance_could_save_ms", "balancing could save (ms/step, predicted)", "{:.3f}"),
    ("overlap_could_save_us_per_iter", "overlap could save (ms/profiled iter)", "ms3"),
    ("cuda_graphs_could_save_us_per_iter", "CUDA graphs could save (ms/profiled iter)", "ms3"),
]

# A job's critical path through its collectives (tracekit.analysis.critical_path.job_figures): per rank.
JOB_CRITICAL_PATH = [
    ("job", "job", "{}"),
    ("rank", "rank", "{:.0f}"),
    ("latency_us", "modelled iter (ms)", "ms3"),
    ("cpu_us", "host CPU (ms)", "ms3"),
    ("launch_us", "launch calls (ms)", "ms3"),
    ("kernel_us", "kernels (ms)", "ms3"),
    ("comm_us", "comm (ms)", "ms3"),
    ("rank_wait_us", "other ranks (ms)", "ms3"),
    ("stream_wait_us", "stream waits (ms)", "ms3"),
]

BALANCE = [
    ("job", "job", "{}"),
    ("metric", "per rank", "{}"),
    ("median_us", "median (ms)", "ms3"),
    ("max_us", "max (ms)", "ms3"),
    ("imbalance", "max/median", "{:.2f}"),
]

RANKS = [
    ("job", "job", "{}"),
    ("rank", "rank", "{:.0f}"),
    ("verdict", "verdict", "{}"),
    ("window_us", "window (ms)", "ms"),
    ("active_span_us", "GPU span (ms)", "ms"),
    ("gpu_busy_us", "GPU busy (ms)", "ms"),
    ("computation_us", "compute (ms)", "ms"),
    ("communication_us", "comm (ms)", "ms"),
    ("comm_comp_overlap", "overlap", "{:.0%}"),
    ("exposed_communication_us", "exposed comm (ms)", "ms"),
    ("rank_wait_us", "waited for ranks (ms)", "ms"),
    ("idle_host_wait_us", "idle: host wait (ms)", "ms"),
    ("idle_rank_wait_us", "idle: rank wait (ms)", "ms"),
    ("collectives", "collectives", "{:.0f}"),
    ("overlap_could_save_us_per_iter", "overlap saves (ms/iter)", "ms3"),
    ("rank_wait_us_per_iter", "waited for ranks (ms/iter)", "ms3"),
    ("cuda_graphs_could_save_us_per_iter", "CUDA graphs save (ms/iter)", "ms3"),
]

STRAGGLERS = [
    ("job", "job", "{}"),
    ("rank", "rank", "{:.0f}"),
    ("calls", "calls", "{:.0f}"),
    ("times_last", "last", "{:.0f}"),
    ("last_share", "last share", "{:.0%}"),
    ("wait_caused_us", "wait caused (ms)", "ms3"),
    ("mean_lateness_us", "mean lateness (ms)", "ms3"),
    ("rank_wait_us", "waited for others (ms)", "ms3"),
    ("flag", "straggler", "{}"),
]


# Each mode against the baseline, module by module (tracekit.analysis.attribution.run_diff.versus_baseline).
MODULE_DIFF = [
    ("workload", "workload", "{}"),
    ("mode", "mode", "{}"),
    ("module", "module", "{}"),
    ("busy_us_a", "busy baseline (µs/iter)", "{:.1f}"),
    ("busy_us_b", "busy mode", "{:.1f}"),
    ("d_busy_us", "Δ busy", "{:+.1f}"),
    ("d_kernels", "Δ kernels", "{:+.3g}"),
    ("d_launches", "Δ launches", "{:+.3g}"),
    ("d_idle_us", "Δ idle before", "{:+.1f}"),
    ("change", "what changed", "{}"),
]

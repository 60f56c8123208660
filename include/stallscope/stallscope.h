/* stallscope C API: record spans, instants and counters into the current recording session.
 *
 * Every function is safe to call when no session is active (it does nothing), never blocks on I/O
 * and never throws. Names are interned once with ss_intern() (slow path, takes a lock) and then
 * passed as ids on the hot path. Timestamps come from the collector's clock.
 *
 * A process joins a session in one of three ways:
 *   - it runs under `stallscope run` (libstallscope.so is preloaded and finds the session arena
 *     through STALLSCOPE_SHM), or is a descendant of such a process;
 *   - it is started with LD_PRELOAD=libstallscope.so and STALLSCOPE_OUTPUT=FILE.db (it records
 *     in-process, a drainer thread writes the database);
 *   - it calls ss_session_start().
 */
#ifndef STALLSCOPE_STALLSCOPE_H_
#define STALLSCOPE_STALLSCOPE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STALLSCOPE_API __attribute__((visibility("default")))

/* Returns the id of `text` in the session's string table (0 when not recording or the table is
 * full). Ids are valid in every process of the session. */
STALLSCOPE_API uint32_t ss_intern(const char* text);
/* Interns a counter track: `name` with its `unit` (e.g. "bytes", "batches", "percent"). */
STALLSCOPE_API uint32_t ss_counter_track(const char* name, const char* unit);

/* Spans nest per thread: ss_span_end closes the innermost open span of the calling thread. */
STALLSCOPE_API void ss_span_begin(uint32_t name);
STALLSCOPE_API void ss_span_begin_args(uint32_t name, int64_t arg0, int32_t arg1, int32_t arg2);
STALLSCOPE_API void ss_span_end(void);
/* Closes the innermost span and sets its arguments (they replace the begin's). */
STALLSCOPE_API void ss_span_end_args(int64_t arg0, int32_t arg1, int32_t arg2);
/* A span of no length, inside the innermost open one: its begin and end carry one timestamp, so a
   thread preempted between two calls cannot lengthen it (a count the span stands for, not a time). */
STALLSCOPE_API void ss_span_empty(uint32_t name, int64_t arg0, int32_t arg1, int32_t arg2);

STALLSCOPE_API void ss_instant(uint32_t name, int64_t arg0, int32_t arg1, int32_t arg2);
/* Records `value` on counter `track` (from ss_counter_track) for this process. */
STALLSCOPE_API void ss_counter(uint32_t track, double value);
/* Records `value` on `track` on behalf of process `pid` (e.g. a sampler reporting a worker). */
STALLSCOPE_API void ss_counter_for(uint32_t track, double value, int32_t pid);
/* Names the calling thread in the recording. */
STALLSCOPE_API void ss_thread_name(const char* name);

/* 1 while this process records into a session. */
STALLSCOPE_API int ss_is_recording(void);
/* Events this process's threads dropped so far because their ring was full or none was free. */
STALLSCOPE_API uint64_t ss_dropped_events(void);
/* OpenMP parallel regions (libgomp's, as torch's intra-op threads use them) entered by this
 * process's threads while libstallscope.so was preloaded, outermost only: out[0] their count,
 * out[1] their wall time on the threads that entered them, out[2] the time their teams spent
 * inside the regions' bodies, all threads summed (nanoseconds). Totals since the process began;
 * zero where nothing was timed (no libgomp, or the library loaded later, as by attach). */
STALLSCOPE_API void ss_parallel_totals(uint64_t out[3]);
STALLSCOPE_API const char* ss_version(void);
/* 1 once stallscope's GPU capture (CUPTI) runs in this process. Another CUPTI client started in
 * the process then records no GPU activity (docs/events.md, "CUDA"). */
STALLSCOPE_API int ss_gpu_capture_on(void);
/* Light GPU mode (STALLSCOPE_GPU=light, `stallscope run --gpu light`): 1 when this process was
 * asked for it. ss_gpu_mark(1) at the start of the training thread's next() call, ss_gpu_mark(2) at
 * its end, record a CUDA event on the default stream there once the process uses CUDA (see
 * collector/gpu_light.h); otherwise they return at once. */
STALLSCOPE_API int ss_gpu_marks_wanted(void);
STALLSCOPE_API void ss_gpu_mark(int kind);

/* Starts an in-process session writing `db_path` (this process owns the drainer). Returns 0 on
 * success; on failure returns -1 and writes a one-line reason into err[err_len]. */
STALLSCOPE_API int ss_session_start(const char* db_path, char* err, size_t err_len);
/* The same, keeping every event of the latest `keep_detail_ns` only, and the summaries of the
 * whole run (`stallscope run --keep-detail`): 0 keeps every event; otherwise at least 10 s. */
STALLSCOPE_API int ss_session_start_keep(const char* db_path, int64_t keep_detail_ns, char* err, size_t err_len);
/* Ends the session started by ss_session_start: final flush, database closed. Returns 0 on success. */
STALLSCOPE_API int ss_session_stop(void);
/* Name of the session's shared-memory arena (the value children need in STALLSCOPE_SHM to join),
 * or NULL when this process records nothing. */
STALLSCOPE_API const char* ss_session_shm(void);

#ifdef __cplusplus
}
#endif

#endif /* STALLSCOPE_STALLSCOPE_H_ */

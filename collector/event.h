// The wire event model: the one header of fixed-size POD records that the collector writes into
// per-thread ring buffers and that the drainer (storage/ingest) turns into database rows.
//
// Rules (shared by collector, storage and UI):
//  - EventKind only grows at the end; a value once shipped keeps its meaning.
//  - An Event is exactly 32 bytes; the pid and tid live in the ring buffer's header, not in every
//    event, so a record carries only what varies.
//  - Any change to the layout bumps kWireFormatVersion; the arena header stores it, and a drainer
//    refuses an arena of another version.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace stallscope {

inline constexpr uint32_t kWireFormatVersion = 2;

enum class EventKind : uint8_t {
  kNone = 0,            // never written; a zeroed slot
  kSpanBegin = 1,       // name, a0, a1, a2 (args valid per flags)
  kSpanEnd = 2,         // closes the innermost open span of the thread; args replace the begin's
  kInstant = 3,         // name, a0, a1, a2
  kCounter = 4,         // name = counter track, a0 = bit pattern of a double value, a1 = pid (flag)
  kThreadName = 5,      // name = interned thread name
  kGpuActivity = 6,     // a GPU activity, first of two slots (see GpuActivity in gpu_activity.h):
                        //   ticks = start (CLOCK_MONOTONIC ns), a0 = end ns, a1 = stream,
                        //   a2 = device << 8 | GpuActivityKind, name = kernel name / copy kind
  kGpuActivityExt = 7,  // second slot: ticks = correlation id, a0 = bytes,
                        //   a1 = copy_kind << 16 | src_kind << 8 | dst_kind, a2 = context,
                        //   name = synchronization type
  kCount                // one past the last kind; not a kind
};

// Flag bits in Event::flags.
inline constexpr uint8_t kFlagArg0 = 1u << 0;  // a0 holds an argument
inline constexpr uint8_t kFlagArg1 = 1u << 1;  // a1 holds an argument
inline constexpr uint8_t kFlagArg2 = 1u << 2;  // a2 holds an argument
inline constexpr uint8_t kFlagArgs = kFlagArg0 | kFlagArg1 | kFlagArg2;
inline constexpr uint8_t kFlagTimeNs = 1u << 7;  // ticks holds CLOCK_MONOTONIC ns (GPU records)

struct Event {
  uint64_t ticks;  // raw clock ticks (see collector/clock.h); converted to ns by the drainer
  int64_t a0;      // first argument (or a counter's value bits)
  int32_t a1;      // second argument
  int32_t a2;      // third argument
  uint32_t name;   // interned string id (0 = none)
  EventKind kind;
  uint8_t flags;
  uint16_t reserved;  // zero; room for a later field without changing the size
};

static_assert(sizeof(Event) == 32, "Event must stay 32 bytes");
static_assert(std::is_trivially_copyable_v<Event>, "Event must be POD");
static_assert(std::is_standard_layout_v<Event>, "Event must be POD");

// Human-readable kind names, in enum order (the database's `event_kinds` table is filled from this).
inline constexpr const char* kEventKindNames[] = {"none",    "span_begin",  "span_end",     "instant",
                                                  "counter", "thread_name", "gpu_activity", "gpu_activity_ext"};
static_assert(sizeof(kEventKindNames) / sizeof(kEventKindNames[0]) == static_cast<size_t>(EventKind::kCount),
              "every kind needs a name");

}  // namespace stallscope

// The rows of storage/rows.h on the wire (remote/wire.h's values). Lists of rows are sent with
// each row's id and time as the difference from the row before (small varints that deflate well).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "remote/wire.h"
#include "storage/reader.h"
#include "storage/rows.h"
#include "storage/session_registry.h"

namespace stallscope::remote {

// Delta state of one list: the previous row's id and time.
struct Prev {
  int64_t id = 0, ts = 0;
};

void put(Out& o, const ProcessRow& r, Prev& p);
void put(Out& o, const ThreadRow& r, Prev& p);
void put(Out& o, const SpanRow& r, Prev& p);
void put(Out& o, const InstantRow& r, Prev& p);
void put(Out& o, const CounterTrackRow& r, Prev& p);
void put(Out& o, const CounterRow& r, Prev& p);
void put(Out& o, const GpuActivityRow& r, Prev& p);
void put(Out& o, const FlushRow& r, Prev& p);
void put(Out& o, const SpanSummaryRow& r, Prev& p);
void put(Out& o, const InstantSummaryRow& r, Prev& p);
void put(Out& o, const HandoffSummaryRow& r, Prev& p);
void put(Out& o, const QueueSummaryRow& r, Prev& p);
void put(Out& o, const CounterSummaryRow& r, Prev& p);
void put(Out& o, const GpuSummaryRow& r, Prev& p);
void put(Out& o, const Reader::SpanTotal& r, Prev& p);
void put(Out& o, const Reader::CounterTotal& r, Prev& p);
void put(Out& o, const Reader::GpuTotal& r, Prev& p);
void put(Out& o, const TableHeads& r, Prev& p);
void put(Out& o, const SessionEntry& r, Prev& p);
void put(Out& o, const std::pair<int64_t, int64_t>& r, Prev& p);
void put(Out& o, const int64_t& r, Prev& p);
void put(Out& o, const uint32_t& r, Prev& p);

void get(In& in, ProcessRow& r, Prev& p);
void get(In& in, ThreadRow& r, Prev& p);
void get(In& in, SpanRow& r, Prev& p);
void get(In& in, InstantRow& r, Prev& p);
void get(In& in, CounterTrackRow& r, Prev& p);
void get(In& in, CounterRow& r, Prev& p);
void get(In& in, GpuActivityRow& r, Prev& p);
void get(In& in, FlushRow& r, Prev& p);
void get(In& in, SpanSummaryRow& r, Prev& p);
void get(In& in, InstantSummaryRow& r, Prev& p);
void get(In& in, HandoffSummaryRow& r, Prev& p);
void get(In& in, QueueSummaryRow& r, Prev& p);
void get(In& in, CounterSummaryRow& r, Prev& p);
void get(In& in, GpuSummaryRow& r, Prev& p);
void get(In& in, Reader::SpanTotal& r, Prev& p);
void get(In& in, Reader::CounterTotal& r, Prev& p);
void get(In& in, Reader::GpuTotal& r, Prev& p);
void get(In& in, TableHeads& r, Prev& p);
void get(In& in, SessionEntry& r, Prev& p);
void get(In& in, std::pair<int64_t, int64_t>& r, Prev& p);
void get(In& in, int64_t& r, Prev& p);
void get(In& in, uint32_t& r, Prev& p);

template <typename T>
void put(Out& o, const T& r) {
  Prev p;
  put(o, r, p);
}
template <typename T>
T get(In& in) {
  Prev p;
  T r{};
  get(in, r, p);
  return r;
}

template <typename T>
void put_list(Out& o, const std::vector<T>& v) {
  o.u(v.size());
  Prev p;
  for (const T& r : v) put(o, r, p);
}
template <typename T>
std::vector<T> get_list(In& in) {
  const size_t n = in.count();
  std::vector<T> v;
  v.reserve(n);
  Prev p;
  for (size_t k = 0; k < n && in.ok(); ++k) {
    T r{};
    get(in, r, p);
    v.push_back(std::move(r));
  }
  return v;
}

template <typename K, typename V>
void put_map(Out& o, const std::map<K, V>& m);
template <>
inline void put_map(Out& o, const std::map<std::string, std::string>& m) {
  o.u(m.size());
  for (const auto& [k, v] : m) {
    o.str(k);
    o.str(v);
  }
}
template <>
inline void put_map(Out& o, const std::map<uint32_t, std::string>& m) {
  o.u(m.size());
  uint32_t prev = 0;
  for (const auto& [k, v] : m) {
    o.u(k - prev);
    prev = k;
    o.str(v);
  }
}
template <>
inline void put_map(Out& o, const std::map<std::string, uint32_t>& m) {
  o.u(m.size());
  for (const auto& [k, v] : m) {
    o.str(k);
    o.u(v);
  }
}
inline std::map<std::string, std::string> get_string_map(In& in) {
  std::map<std::string, std::string> m;
  const size_t n = in.count();
  for (size_t k = 0; k < n && in.ok(); ++k) {
    std::string key = in.str();
    m[std::move(key)] = in.str();
  }
  return m;
}
inline std::map<uint32_t, std::string> get_id_string_map(In& in) {
  std::map<uint32_t, std::string> m;
  const size_t n = in.count();
  uint32_t prev = 0;
  for (size_t k = 0; k < n && in.ok(); ++k) {
    prev = static_cast<uint32_t>(prev + in.u());
    m[prev] = in.str();
  }
  return m;
}
inline std::map<std::string, uint32_t> get_string_id_map(In& in) {
  std::map<std::string, uint32_t> m;
  const size_t n = in.count();
  for (size_t k = 0; k < n && in.ok(); ++k) {
    std::string key = in.str();
    m[std::move(key)] = static_cast<uint32_t>(in.u());
  }
  return m;
}

// Whole results (a call's kDone): one overload per result type of storage/reader.h.
inline void enc(Out& o, int64_t v) { o.i(v); }
inline void enc(Out& o, bool v) { o.b(v); }
inline void enc(Out& o, const std::optional<int64_t>& v) { o.opt(v); }
inline void enc(Out& o, const TableHeads& v) { put(o, v); }
inline void enc(Out& o, const std::map<std::string, std::string>& v) { put_map(o, v); }
inline void enc(Out& o, const std::map<uint32_t, std::string>& v) { put_map(o, v); }
inline void enc(Out& o, const std::map<std::string, uint32_t>& v) { put_map(o, v); }
template <typename T>
void enc(Out& o, const std::vector<T>& v) {
  put_list(o, v);
}
template <typename T>
void enc(Out& o, const std::optional<T>& v) {
  o.b(v.has_value());
  if (v) enc(o, *v);
}
inline void enc(Out& o, const FlushRow& v) { put(o, v); }

inline void dec(In& in, int64_t& v) { v = in.i(); }
inline void dec(In& in, bool& v) { v = in.b(); }
inline void dec(In& in, std::optional<int64_t>& v) { v = in.opt(); }
inline void dec(In& in, TableHeads& v) { v = get<TableHeads>(in); }
inline void dec(In& in, std::map<std::string, std::string>& v) { v = get_string_map(in); }
inline void dec(In& in, std::map<uint32_t, std::string>& v) { v = get_id_string_map(in); }
inline void dec(In& in, std::map<std::string, uint32_t>& v) { v = get_string_id_map(in); }
template <typename T>
void dec(In& in, std::vector<T>& v) {
  v = get_list<T>(in);
}
inline void dec(In& in, FlushRow& v) { v = get<FlushRow>(in); }
template <typename T>
void dec(In& in, std::optional<T>& v) {
  if (!in.b()) {
    v.reset();
    return;
  }
  T t{};
  dec(in, t);
  v = std::move(t);
}

}  // namespace stallscope::remote

// Fuzz target: the frames and values `stallscope serve` and its clients read from the other end
// (remote/wire.h, remote/codec.h). The input is read as a stream of frames, as a link delivers
// it; each frame's payload is then decoded as every kind of answer and request argument. Nothing
// may crash, hang or read out of bounds; a damaged frame or value is refused.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "remote/codec.h"
#include "remote/wire.h"

namespace r = stallscope::remote;

namespace {

void decode_all(const std::string& payload) {
  using namespace stallscope;
  auto as = [&](auto&& read) {
    r::In in(payload);
    read(in);
  };
  as([](r::In& in) { (void)r::get_list<ProcessRow>(in); });
  as([](r::In& in) { (void)r::get_list<ThreadRow>(in); });
  as([](r::In& in) { (void)r::get_list<SpanRow>(in); });
  as([](r::In& in) { (void)r::get_list<InstantRow>(in); });
  as([](r::In& in) { (void)r::get_list<CounterTrackRow>(in); });
  as([](r::In& in) { (void)r::get_list<CounterRow>(in); });
  as([](r::In& in) { (void)r::get_list<GpuActivityRow>(in); });
  as([](r::In& in) { (void)r::get_list<FlushRow>(in); });
  as([](r::In& in) { (void)r::get_list<SpanSummaryRow>(in); });
  as([](r::In& in) { (void)r::get_list<HandoffSummaryRow>(in); });
  as([](r::In& in) { (void)r::get_list<QueueSummaryRow>(in); });
  as([](r::In& in) { (void)r::get_list<SessionEntry>(in); });
  as([](r::In& in) { (void)r::get_string_map(in); });
  as([](r::In& in) { (void)r::get_id_string_map(in); });
  as([](r::In& in) {
    std::optional<std::vector<HandoffSummaryRow>> v;
    r::dec(in, v);
  });
  as([](r::In& in) {
    TableHeads h;
    r::dec(in, h);
    (void)in.d();
    (void)in.str();
    (void)in.opt();
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  while (rest.size() >= r::kHeaderBytes) {
    auto h = r::parse_header(reinterpret_cast<const uint8_t*>(rest.data()));
    if (!h.ok()) break;
    rest.remove_prefix(r::kHeaderBytes);
    if (h->size > rest.size()) break;
    auto payload = r::open_payload(*h, rest.substr(0, h->size));
    rest.remove_prefix(h->size);
    if (!payload.ok()) continue;
    decode_all(*payload);
  }
  // And a well-formed frame around the whole input: every payload decoder sees arbitrary bytes.
  const std::string frame = r::encode_frame(r::Frame{r::FrameType::kPart, 7, std::string(rest), 0});
  auto h = r::parse_header(reinterpret_cast<const uint8_t*>(frame.data()));
  if (h.ok()) {
    auto p = r::open_payload(*h, std::string_view(frame).substr(r::kHeaderBytes));
    if (p.ok()) decode_all(*p);
  }
  return 0;
}

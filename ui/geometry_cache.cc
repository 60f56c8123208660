// Geometry kept across frames; see geometry_cache.h.
#include "ui/geometry_cache.h"

#include <cstring>

namespace stallscope::ui {

void GeometryCache::new_frame(const void* data, const void* more) {
  if (data == data_ && more == more_) return;
  data_ = data;
  more_ = more;
  entries_.clear();
  values_.clear();
}

const GeometryCache::Entry* GeometryCache::find(const Key& k) {
  auto it = entries_.find(k.what);
  if (it == entries_.end() || !(it->second.key == k)) {
    ++misses_;
    return nullptr;
  }
  ++hits_;
  return &it->second;
}

GeometryCache::Mark GeometryCache::mark(const ImDrawList* dl) {
  return Mark{dl->CmdBuffer.Size, dl->VtxBuffer.Size, dl->IdxBuffer.Size, dl->_VtxCurrentIdx};
}

void GeometryCache::store(const ImDrawList* dl, const Key& k, const Mark& m, int64_t result) {
  if (dl->CmdBuffer.Size != m.cmds || dl->_VtxCurrentIdx < m.base) {
    entries_.erase(k.what);  // spread over draw commands: drawn again next time
    return;
  }
  Entry& e = entries_[k.what];
  e.key = k;
  e.result = result;
  e.vtx.assign(dl->VtxBuffer.Data + m.vtx, dl->VtxBuffer.Data + dl->VtxBuffer.Size);
  e.idx.resize(static_cast<size_t>(dl->IdxBuffer.Size - m.idx));
  for (size_t i = 0; i < e.idx.size(); ++i) {
    e.idx[i] = static_cast<ImDrawIdx>(dl->IdxBuffer.Data[static_cast<size_t>(m.idx) + i] - m.base);
  }
}

void GeometryCache::replay(ImDrawList* dl, const Entry& e) {
  if (e.idx.empty()) return;
  const int nv = static_cast<int>(e.vtx.size()), ni = static_cast<int>(e.idx.size());
  dl->PrimReserve(ni, nv);  // may start a new vertex offset: _VtxCurrentIdx is read after
  std::memcpy(dl->_VtxWritePtr, e.vtx.data(), e.vtx.size() * sizeof(ImDrawVert));
  const unsigned base = dl->_VtxCurrentIdx;
  for (int i = 0; i < ni; ++i) dl->_IdxWritePtr[i] = static_cast<ImDrawIdx>(e.idx[static_cast<size_t>(i)] + base);
  dl->_VtxWritePtr += nv;
  dl->_IdxWritePtr += ni;
  dl->_VtxCurrentIdx += static_cast<unsigned>(nv);
}

std::vector<double>& GeometryCache::values(const Key& k, bool* fresh) {
  auto& slot = values_[k.what];
  if (slot.first == k && !slot.second.empty()) {
    ++hits_;
    *fresh = false;
  } else {
    ++misses_;
    slot.first = k;
    slot.second.clear();
    *fresh = true;
  }
  return slot.second;
}

}  // namespace stallscope::ui

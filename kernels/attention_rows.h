// The rows each decode query attends to, as indices into the device cache's pool of 584-byte rows
// (kernels/kv_row.h): its sliding window from the sequence's ring, then its compressed rows —
// the ones the indexer selected (CSA) or all visible ones (HCA) — through the sequence's page
// table. The same rows in the same order as the CPU forward gathers them (engine/model/
// attention.cc); MqaDecodeFp8Rows takes the result as its row index and offsets. Device
// pointers; `stream` is a cudaStream_t as void*; returns the CUDA error code (0 on success).
#pragma once

#include <cstdint>

namespace deepinfer::kernels {

struct AttentionRowsArgs {
  int64_t queries = 0;
  const int64_t* pos = nullptr;          // [queries] the query's position
  const int64_t* window_from = nullptr;  // [queries] first position its ring holds; null: 0
  const int32_t* ring_row = nullptr;     // [queries] pool row of the query's ring slot 0
  int window = 0;                        // window positions a query reads
  int ring = 0;  // ring slots (>= window; 0: window); position p sits in slot p % ring
  const int32_t* visible = nullptr;     // [queries] compressed rows the query may see
  const int32_t* selected = nullptr;    // [queries, top_k] the indexer's picks (CSA), or null
  int top_k = 0;                        //   (HCA: every visible row, in order)
  const int32_t* page_table = nullptr;  // [queries, pages_per_query] pool pages of its rows
  int64_t pages_per_query = 0;
  int page_rows =
      0;  // compressed row j: pool row page_table[j / page_rows] * page_rows + j % page_rows
};

/// Writes offsets[queries + 1] (offsets[0] = 0) and row_index[offsets[q] ..] for each query: the
/// window positions max(0, pos - window + 1, window_from) .. pos in order (their rows are in the
/// ring: the step writes its own row there first), then min(top_k, visible) selected rows in
/// the indexer's order (CSA) or rows 0 .. visible - 1 (HCA). row_index holds at least
/// queries * (window + top_k, or + the largest visible count) entries. Two launches: counts and
/// their prefix sums in one block, then one block per query.
int BuildAttentionRows(const AttentionRowsArgs& args, int64_t* offsets, int32_t* row_index,
                       void* stream);

}  // namespace deepinfer::kernels

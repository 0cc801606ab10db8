// Chat messages and the rendered prompt: the types shared by the V4 chat template, the output
// parser, the OpenAI conversion and the tokenizer.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace deepinfer {

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments_json;  // a JSON object, as text
};

struct ChatMessage {
  std::string role;  // system | user | assistant | tool | developer | latest_reminder
  std::string content;
  std::string reasoning_content;     // assistant turns in thinking mode
  std::vector<ToolCall> tool_calls;  // assistant turns
  std::string tool_call_id;          // tool results
  std::string name;                  // tool results: the function's name, when given
};

struct ChatOptions {
  bool thinking = false;             // render the thinking-mode transition (<think>)
  std::string reasoning_effort;      // "" (default), "high", "max" (thinking mode only)
  std::string tools_json;            // "" or a JSON array of OpenAI-style tool definitions
  std::string response_format_json;  // "" or the response_format object, as text
  bool drop_old_reasoning = true;    // drop reasoning of turns before the last user message
  bool add_generation_prompt = true;
};

/// The prompt as one string plus the byte ranges in it that are template markers (special
/// tokens such as <｜User｜>). Only those ranges may become special token ids; everything else,
/// user content above all, is encoded as plain text.
struct RenderedPrompt {
  std::string text;
  std::vector<std::pair<size_t, size_t>> special_spans;  // [begin, end) byte offsets, ascending
};

}  // namespace deepinfer

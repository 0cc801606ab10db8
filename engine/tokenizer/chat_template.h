// The DeepSeek-V4 chat template: renders a conversation into the prompt text the model was
// trained on, following DeepSeek's official `encoding_dsv4.py` (see docs/chat-template.md).
#pragma once

#include <string>
#include <vector>

#include "engine/common/status.h"
#include "engine/tokenizer/chat.h"

namespace deepinfer {

/// Renders BOS + the messages exactly as the official V4 encoder does:
///  - system: raw text, then "\n\n" + the tools block and "\n\n" + the response-format block
///    when ChatOptions carries them (attached to the first message if it is a system message,
///    otherwise to an empty system message inserted first);
///  - user / developer: <｜User｜> + text; tool results are merged into the following user turn
///    as <tool_result>...</tool_result> blocks (joined by "\n\n", in the order of the calls);
///  - assistant: [reasoning + </think>] + content + ["\n\n" + DSML tool calls] + EOS;
///  - latest_reminder: <｜latest_reminder｜> + text;
///  - after the last user/developer turn: <｜Assistant｜> + <think> (thinking) or </think>.
/// Every marker the template writes is recorded in special_spans; message content never is.
/// Errors (InvalidArgument): unknown role, a tool message not preceded by an assistant tool
/// call, malformed tools/response_format JSON, a tool call without a name or with non-object
/// arguments, an empty developer message, reasoning_effort outside {"", "high", "max"}, or "max"
/// without thinking.
Result<RenderedPrompt> RenderV4Chat(const std::vector<ChatMessage>& messages,
                                    const ChatOptions& options);

/// Every marker string RenderV4Chat can place in special_spans, so the tokenizer can check up
/// front that each one is a single special token of its vocabulary.
std::vector<std::string> V4ChatSpecialTokens();

}  // namespace deepinfer

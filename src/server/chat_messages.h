// A chat request's `messages`: roles system (developer), user, assistant and tool; text content as a string or text
// parts; an assistant's tool_calls (arguments parsed into an object for the chat template when they parse) and a
// tool message's tool_call_id. Errors name the message and field ("messages[2].tool_call_id").
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "chat/chat_template.h"
#include "server/request_fields.h"

namespace kvs::server {

MaybeError parse_messages(const nlohmann::json& v, std::vector<chat::ChatMessage>& out);

}  // namespace kvs::server

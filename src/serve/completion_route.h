// POST /v1/chat/completions and /v1/completions: parse the body, build the prompt, submit one
// sequence per choice to the scheduler of the model the request names, then either collect them
// into one response or stream them as server-sent events. A streaming client that goes away
// (a write fails) cancels its sequences, which frees their slots at the next step.
#pragma once

#include <httplib.h>

#include "serve/request_parsing.h"
#include "serve/serve_context.h"

namespace surogate::serve {

// Throws ApiError (or UserError) for a request it refuses; the server turns them into responses.
void handle_completion(ServeContext& context, Endpoint endpoint, const httplib::Request& request,
                       httplib::Response& response);

}  // namespace surogate::serve

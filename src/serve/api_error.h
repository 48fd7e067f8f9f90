// An HTTP error as the OpenAI API reports it: a status and
//   {"error": {"message": ..., "type": ..., "param": FIELD or null, "code": ... or null}}
// Thrown by request parsing and the routes; the server turns it into the response.
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace surogate::serve {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = {}, std::string type = "invalid_request_error",
           std::string code = {})
      : std::runtime_error(message), status_(status), param_(std::move(param)), type_(std::move(type)),
        code_(std::move(code)) {}

  int status() const { return status_; }
  nlohmann::json body() const { return error_body(what(), type_, param_, code_); }

  // The body; an empty param or code is null.
  static nlohmann::json error_body(const std::string& message, const std::string& type, const std::string& param,
                                   const std::string& code) {
    nlohmann::json error = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
    if (!param.empty()) error["param"] = param;
    if (!code.empty()) error["code"] = code;
    return {{"error", error}};
  }

 private:
  int status_;
  std::string param_, type_, code_;
};

// A 400 naming the field.
[[noreturn]] inline void fail_field(const std::string& field, const std::string& message) {
  throw ApiError(400, field + ": " + message, field);
}

}  // namespace surogate::serve

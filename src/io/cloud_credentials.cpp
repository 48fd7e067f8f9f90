// S3 / GCS settings and credentials; see cloud_credentials.h.
#include "io/cloud_credentials.h"

#include <openssl/evp.h>
#include <openssl/pem.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/environment.h"
#include "io/percent_encoding.h"

namespace surogate::io {
namespace {

namespace fs = std::filesystem;

constexpr const char* kReadOnlyScope = "https://www.googleapis.com/auth/devstorage.read_only";

std::string home() { return environment_variable("HOME").value_or("/"); }

std::optional<std::string> read_text(const fs::path& path) {
  std::ifstream stream(path);
  if (!stream) return std::nullopt;
  std::stringstream text;
  text << stream.rdbuf();
  return text.str();
}

std::string trim(std::string text) {
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) text.pop_back();
  size_t start = text.find_first_not_of(" \t");
  return start == std::string::npos ? std::string() : text.substr(start);
}

std::string base64url(const unsigned char* data, size_t size) {
  std::string encoded(4 * ((size + 2) / 3) + 1, '\0');
  const int length = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(encoded.data()), data, static_cast<int>(size));
  encoded.resize(static_cast<size_t>(length));
  for (char& c : encoded) c = c == '+' ? '-' : c == '/' ? '_' : c;
  while (!encoded.empty() && encoded.back() == '=') encoded.pop_back();
  return encoded;
}

std::string base64url(const std::string& text) {
  return base64url(reinterpret_cast<const unsigned char*>(text.data()), text.size());
}

// POSTs a token request and returns its access_token.
std::string exchange_token(const std::string& token_uri, const std::string& body, const std::string& credentials,
                           const std::string& url, long timeout_seconds) {
  HttpClient http(std::nullopt, timeout_seconds);
  HttpResponse response = http.post_form(token_uri, body);
  nlohmann::json answer = nlohmann::json::parse(response.body, nullptr, false);
  if (response.status != 200 || answer.is_discarded() || !answer.contains("access_token") ||
      !answer["access_token"].is_string()) {
    std::string reason = answer.is_object() && answer.contains("error_description") && answer["error_description"].is_string()
                             ? answer["error_description"].get<std::string>()
                             : fmt::format("HTTP {}", response.status);
    fail_user("{}: the Google credentials in {} were refused by {} ({}); check the key file or set "
              "GOOGLE_OAUTH_ACCESS_TOKEN", url, credentials, token_uri, reason);
  }
  return answer["access_token"].get<std::string>();
}

}  // namespace

std::optional<std::string> ini_value(const std::string& text, const std::string& section, const std::string& key) {
  std::istringstream stream(text);
  std::string line, current;
  while (std::getline(stream, line)) {
    line = trim(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      current = trim(line.substr(1, line.size() - 2));
      continue;
    }
    const size_t equals = line.find('=');
    if (current == section && equals != std::string::npos && trim(line.substr(0, equals)) == key) {
      return trim(line.substr(equals + 1));
    }
  }
  return std::nullopt;
}

S3Settings read_s3_settings(const std::string& url) {
  const std::string profile = environment_variable("AWS_PROFILE").value_or(environment_variable("AWS_DEFAULT_PROFILE").value_or("default"));
  const fs::path credentials_file = environment_variable("AWS_SHARED_CREDENTIALS_FILE").value_or(home() + "/.aws/credentials");
  const fs::path config_file = environment_variable("AWS_CONFIG_FILE").value_or(home() + "/.aws/config");
  const std::optional<std::string> credentials = read_text(credentials_file);
  const std::optional<std::string> config = read_text(config_file);
  // In ~/.aws/config a profile's section is "[profile NAME]" (but "[default]").
  const std::string config_section = profile == "default" ? profile : "profile " + profile;
  auto from_files = [&](const std::string& key) -> std::optional<std::string> {
    if (credentials) {
      if (auto value = ini_value(*credentials, profile, key)) return value;
    }
    if (config) return ini_value(*config, config_section, key);
    return std::nullopt;
  };

  S3Settings settings;
  AwsSigning& signing = settings.signing;
  std::optional<std::string> key = environment_variable("AWS_ACCESS_KEY_ID"), secret = environment_variable("AWS_SECRET_ACCESS_KEY");
  if (key && secret) {
    signing.access_key_id = *key;
    signing.secret_access_key = *secret;
    signing.session_token = environment_variable("AWS_SESSION_TOKEN");
  } else {
    key = from_files("aws_access_key_id");
    secret = from_files("aws_secret_access_key");
    if (!key || !secret) {
      fail_user("{}: no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for "
                "temporary ones), or give profile '{}' aws_access_key_id / aws_secret_access_key in {} (AWS_PROFILE "
                "picks another profile)", url, profile, credentials_file.string());
    }
    signing.access_key_id = *key;
    signing.secret_access_key = *secret;
    signing.session_token = from_files("aws_session_token");
  }
  signing.region = environment_variable("AWS_REGION").value_or(
      environment_variable("AWS_DEFAULT_REGION").value_or(from_files("region").value_or("us-east-1")));
  std::optional<std::string> endpoint = environment_variable("AWS_ENDPOINT_URL_S3");
  if (!endpoint) endpoint = environment_variable("AWS_ENDPOINT_URL");
  if (!endpoint) endpoint = from_files("endpoint_url");
  if (endpoint) {
    while (!endpoint->empty() && endpoint->back() == '/') endpoint->pop_back();
    if (!endpoint->starts_with("http://") && !endpoint->starts_with("https://")) {
      fail_user("{}: the S3 endpoint '{}' (AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_S3 / endpoint_url) must start with "
                "http:// or https://", url, *endpoint);
    }
    settings.endpoint = endpoint;
  }
  return settings;
}

std::string service_account_assertion(const std::string& client_email, const std::string& private_key_pem,
                                      const std::string& token_uri, const std::string& scope, long issued_at) {
  const std::string header = base64url(R"({"alg":"RS256","typ":"JWT"})");
  const nlohmann::json claims{{"iss", client_email}, {"scope", scope}, {"aud", token_uri},
                              {"iat", issued_at},    {"exp", issued_at + 3600}};
  const std::string signing_input = header + "." + base64url(claims.dump());
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(private_key_pem.data(), static_cast<int>(private_key_pem.size())),
                                               BIO_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr, EVP_PKEY_free);
  if (!key) fail_user("the service account's private_key is not a PEM private key");
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  size_t length = 0;
  const auto* input = reinterpret_cast<const unsigned char*>(signing_input.data());
  if (!context || EVP_DigestSignInit(context.get(), nullptr, EVP_sha256(), nullptr, key.get()) != 1 ||
      EVP_DigestSign(context.get(), nullptr, &length, input, signing_input.size()) != 1) {
    fail_user("the service account's private_key cannot sign (it must be an RSA key)");
  }
  std::string signature(length, '\0');
  if (EVP_DigestSign(context.get(), reinterpret_cast<unsigned char*>(signature.data()), &length, input,
                     signing_input.size()) != 1) {
    fail_user("the service account's private_key cannot sign (it must be an RSA key)");
  }
  signature.resize(length);
  return signing_input + "." + base64url(signature);
}

GcsSettings read_gcs_settings(const std::string& url, long timeout_seconds) {
  GcsSettings settings;
  const std::optional<std::string> emulator = environment_variable("STORAGE_EMULATOR_HOST");
  if (emulator) {
    std::string endpoint = *emulator;
    while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
    settings.endpoint = endpoint.find("://") == std::string::npos ? "http://" + endpoint : endpoint;
  }
  if ((settings.access_token = environment_variable("GOOGLE_OAUTH_ACCESS_TOKEN"))) return settings;
  std::optional<std::string> path = environment_variable("GOOGLE_APPLICATION_CREDENTIALS");
  const fs::path gcloud_default = home() + "/.config/gcloud/application_default_credentials.json";
  if (!path && !emulator && fs::exists(gcloud_default)) path = gcloud_default.string();
  if (!path && emulator) return settings;  // emulators take requests without credentials
  if (!path) {
    fail_user("{}: no Google Cloud credentials: set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file, "
              "or GOOGLE_OAUTH_ACCESS_TOKEN to an access token (`gcloud auth print-access-token`), or run `gcloud "
              "auth application-default login`; STORAGE_EMULATOR_HOST points at an emulator", url);
  }
  const std::optional<std::string> text = read_text(*path);
  nlohmann::json key = text ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
  if (!text || key.is_discarded() || !key.is_object()) {
    fail_user("{}: the Google credentials file {} (GOOGLE_APPLICATION_CREDENTIALS) cannot be read as JSON", url, *path);
  }
  const std::string type = key.value("type", "");
  const std::string token_uri = key.value("token_uri", "https://oauth2.googleapis.com/token");
  if (type == "service_account") {
    if (!key.contains("client_email") || !key.contains("private_key")) {
      fail_user("{}: the service-account key {} lacks client_email or private_key", url, *path);
    }
    const std::string assertion =
        service_account_assertion(key["client_email"].get<std::string>(), key["private_key"].get<std::string>(),
                                  token_uri, kReadOnlyScope, static_cast<long>(std::time(nullptr)));
    settings.access_token =
        exchange_token(token_uri, "grant_type=" + percent_encode("urn:ietf:params:oauth:grant-type:jwt-bearer") +
                                      "&assertion=" + assertion, *path, url, timeout_seconds);
  } else if (type == "authorized_user") {
    settings.access_token = exchange_token(
        token_uri,
        "grant_type=refresh_token&client_id=" + percent_encode(key.value("client_id", "")) +
            "&client_secret=" + percent_encode(key.value("client_secret", "")) +
            "&refresh_token=" + percent_encode(key.value("refresh_token", "")),
        *path, url, timeout_seconds);
  } else {
    fail_user("{}: the Google credentials file {} has type '{}'; Surogate reads 'service_account' and "
              "'authorized_user' files (or set GOOGLE_OAUTH_ACCESS_TOKEN)", url, *path, type);
  }
  return settings;
}

}  // namespace surogate::io

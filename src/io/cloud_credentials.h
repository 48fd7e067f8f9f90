// Where s3:// and gs:// requests go and with which credentials, read from each ecosystem's usual
// environment variables and files (docs/data.md, "Cloud storage"):
//   S3:  AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, else the profile
//        AWS_PROFILE (default "default") of AWS_SHARED_CREDENTIALS_FILE (~/.aws/credentials)
//        and AWS_CONFIG_FILE (~/.aws/config); region from AWS_REGION, AWS_DEFAULT_REGION, the
//        profile's `region`, else us-east-1; endpoint from AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL or
//        the profile's `endpoint_url` (path-style requests), else https://<bucket>.s3.<region>.amazonaws.com.
//   GCS: endpoint https://storage.googleapis.com, or STORAGE_EMULATOR_HOST (an emulator, where
//        credentials are optional); an access token from GOOGLE_OAUTH_ACCESS_TOKEN, else
//        GOOGLE_APPLICATION_CREDENTIALS (or, without an emulator, gcloud's
//        ~/.config/gcloud/application_default_credentials.json): a service-account key (a JWT
//        signed with its RS256 key, exchanged at its token_uri for a read-only token) or an
//        authorized-user file (its refresh token exchanged).
// Missing credentials are a UserError naming the variables to set.
#pragma once

#include <optional>
#include <string>

#include "io/hub_http.h"

namespace surogate::io {

struct S3Settings {
  AwsSigning signing;
  std::optional<std::string> endpoint;  // custom endpoint, no trailing slash (path-style URLs)
};

// `url` (for messages) is the s3:// URL being read.
S3Settings read_s3_settings(const std::string& url);

struct GcsSettings {
  std::string endpoint = "https://storage.googleapis.com";  // no trailing slash
  std::optional<std::string> access_token;                   // none against an emulator
};

GcsSettings read_gcs_settings(const std::string& url, long timeout_seconds);

// Parses an INI file (~/.aws/credentials): the value of `key` in section `section`, if present.
std::optional<std::string> ini_value(const std::string& text, const std::string& section, const std::string& key);

// The RS256 JWT assertion of a service account's OAuth token request (exposed for tests).
std::string service_account_assertion(const std::string& client_email, const std::string& private_key_pem,
                                      const std::string& token_uri, const std::string& scope, long issued_at);

}  // namespace surogate::io

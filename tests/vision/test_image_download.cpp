// Row images by URL (vision/image_download.h) against a cpp-httplib server on 127.0.0.1 (a free
// port; nothing leaves the machine): the body comes back byte for byte, redirects are followed
// (absolute, absolute-path and relative Locations) up to the limit, and each failure is one
// UserError naming the field and the URL.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <string>
#include <thread>

#include "user_error_of.h"
#include "vision/image_download.h"
#include "vision/image_source.h"
#include "vision/sigpipe_blocked.h"

namespace surogate::vision {
namespace {

const std::string kBody = std::string("\x89PNG\r\n\x1a\n", 8) + std::string(3000, 'x');

class LocalServer {
public:
  LocalServer() {
    server_.Get("/a.png", [](const httplib::Request&, httplib::Response& res) { res.set_content(kBody, "image/png"); });
    server_.Get("/dir/b image.png",
                [](const httplib::Request&, httplib::Response& res) { res.set_content(kBody, "image/png"); });
    server_.Get("/to-absolute-path", [](const httplib::Request&, httplib::Response& res) { res.set_redirect("/a.png"); });
    server_.Get("/dir/to-relative",
                [](const httplib::Request&, httplib::Response& res) { res.set_redirect("b%20image.png", 307); });
    server_.Get("/to-full-url", [this](const httplib::Request&, httplib::Response& res) {
      res.set_redirect(url("/dir/to-relative"), 301);
    });
    server_.Get(R"(/loop/(\d+))", [](const httplib::Request& req, httplib::Response& res) {
      res.set_redirect("/loop/" + std::to_string(std::stoi(req.matches[1]) + 1));
    });
    server_.Get("/to-ftp", [](const httplib::Request&, httplib::Response& res) { res.set_redirect("ftp://x/a.png"); });
    server_.Get("/big", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string(5000, 'y'), "image/png");
    });
    server_.Get("/big-chunked", [](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("image/png", [](size_t offset, httplib::DataSink& sink) {
        if (offset >= 5000) {
          sink.done();
          return true;
        }
        const std::string chunk(500, 'z');
        return sink.write(chunk.data(), chunk.size());
      });
    });
    server_.Get("/slow", [](const httplib::Request&, httplib::Response& res) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));
      res.set_content(kBody, "image/png");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~LocalServer() {
    server_.stop();
    thread_.join();
  }
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }

private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

// A port nothing listens on: one the kernel hands out, bound and closed without a listen().
int closed_port() {
  const int sock = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  EXPECT_EQ(bind(sock, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  EXPECT_EQ(getsockname(sock, reinterpret_cast<sockaddr*>(&address), &length), 0);
  close(sock);
  return ntohs(address.sin_port);
}

TEST(ImageDownload, TheBodyComesBackNamedByTheUrl) {
  LocalServer server;
  const ImageBytes image = load_image_reference(server.url("/a.png"), "/unused", "rows.jsonl:1: image");
  EXPECT_EQ(image.name, server.url("/a.png"));
  EXPECT_EQ(std::string(image.bytes.begin(), image.bytes.end()), kBody);
  // A space is percent-encoded on the request line, as requests' requote_uri does.
  EXPECT_EQ(download_image(server.url("/dir/b image.png"), "f").bytes.size(), kBody.size());
}

TEST(ImageDownload, RedirectsAreFollowedUpToTheLimit) {
  LocalServer server;
  for (const std::string path : {"/to-absolute-path", "/dir/to-relative", "/to-full-url"}) {
    const ImageBytes image = download_image(server.url(path), "f");
    EXPECT_EQ(image.name, server.url(path));
    EXPECT_EQ(image.bytes.size(), kBody.size()) << path;
  }
  DownloadLimits limits;
  limits.max_redirects = 3;
  const std::string loop = error_of([&] { download_image(server.url("/loop/0"), "rows.jsonl:2: image", limits); });
  EXPECT_EQ(loop, "rows.jsonl:2: image: downloading image " + server.url("/loop/0") + " (redirected to " +
                      server.url("/loop/3") + "): more than 3 redirects");
  const std::string ftp = error_of([&] { download_image(server.url("/to-ftp"), "f"); });
  EXPECT_NE(ftp.find("redirected to ftp://x/a.png, which is not an http:// or https:// URL"), std::string::npos) << ftp;
}

TEST(ImageDownload, EachFailureIsOneErrorNamingFieldAndUrl) {
  LocalServer server;
  const std::string prefix = "rows.jsonl:3: messages[0].content[1].image: downloading image ";
  const std::string field = "rows.jsonl:3: messages[0].content[1].image";
  EXPECT_EQ(error_of([&] { download_image(server.url("/missing.png"), field); }),
            prefix + server.url("/missing.png") + ": the server answered HTTP status 404");
  const std::string refused_url = "http://127.0.0.1:" + std::to_string(closed_port()) + "/a.png";
  EXPECT_EQ(error_of([&] { download_image(refused_url, field); }),
            prefix + refused_url + ": could not connect (the connection was refused, or the host was not found)");
  const std::string with_credentials = "http://user:secret@127.0.0.1:" + std::to_string(closed_port()) + "/a.png";
  EXPECT_EQ(error_of([&] { download_image(with_credentials, field); }),
            prefix + with_credentials +
                ": credentials in an image URL (user:password@) are not supported; download the image and give its path");
  DownloadLimits small;
  small.max_bytes = 4000;
  for (const std::string path : {"/big", "/big-chunked"}) {
    EXPECT_EQ(error_of([&] { download_image(server.url(path), field, small); }),
              prefix + server.url(path) + ": the body is larger than the 4000 bytes allowed for a downloaded image")
        << path;
  }
  DownloadLimits impatient;
  impatient.read_timeout_s = 1;
  const std::string slow = error_of([&] { download_image(server.url("/slow"), field, impatient); });
  EXPECT_EQ(slow, prefix + server.url("/slow") +
                      ": reading the response failed (the connection closed, or no data came for 1 s)");
}

// A SIGPIPE raised on the thread inside the scope (as OpenSSL's write() to a closed connection
// raises it) is consumed instead of ending the test process; the thread's mask comes back.
TEST(ImageDownload, SigpipeInsideADownloadDoesNotEndTheProcess) {
  sigset_t before;
  pthread_sigmask(SIG_SETMASK, nullptr, &before);
  {
    const SigpipeBlocked blocked;
    ASSERT_EQ(pthread_kill(pthread_self(), SIGPIPE), 0);
  }
  sigset_t after;
  pthread_sigmask(SIG_SETMASK, nullptr, &after);
  EXPECT_EQ(sigismember(&after, SIGPIPE), sigismember(&before, SIGPIPE));
  sigset_t pending;
  sigpending(&pending);
  EXPECT_EQ(sigismember(&pending, SIGPIPE), 0);
}

}  // namespace
}  // namespace surogate::vision

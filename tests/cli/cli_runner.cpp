#include "tests/cli/cli_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

namespace onnxforge::test {

std::filesystem::path onnxforge_binary() { return std::filesystem::path(ONNXFORGE_BINARY_DIR) / "onnxforge"; }

std::string CliResult::describe() const {
  std::string s = timed_out ? "timed out (hang)"
                  : signal  ? "killed by signal " + std::to_string(signal)
                            : "exit " + std::to_string(code);
  return s + "\n--- stdout ---\n" + out.substr(0, 4000) + "\n--- stderr ---\n" + err.substr(0, 4000);
}

CliResult run_cli(const std::vector<std::string>& args, double timeout_seconds) {
  CliResult r;
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    r.err = "pipe failed";
    return r;
  }
  std::string bin = onnxforge_binary().string();
  std::vector<char*> argv{bin.data()};
  std::vector<std::string> copy = args;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  while (open_fds > 0) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      r.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    int n = ::poll(fds, 2, static_cast<int>(left));
    if (n < 0 && errno == EINTR) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[65536];
      ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        sinks[i]->append(buf, static_cast<size_t>(got));
      } else {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status))
    r.code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status) && !r.timed_out)
    r.signal = WTERMSIG(status);
  return r;
}

onnx::ModelProto make_model(const std::vector<onnx::NodeProto>& nodes, const std::vector<onnx::ValueInfoProto>& inputs,
                            const std::vector<onnx::ValueInfoProto>& outputs,
                            const std::vector<onnx::TensorProto>& initializers, int opset, int ir_version) {
  onnx::ModelProto m;
  m.set_ir_version(ir_version);
  m.set_producer_name("onnxforge-test");
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("g");
  for (const auto& n : nodes) *g->add_node() = n;
  for (const auto& v : inputs) *g->add_input() = v;
  for (const auto& v : outputs) *g->add_output() = v;
  for (const auto& t : initializers) *g->add_initializer() = t;
  return m;
}

onnx::ValueInfoProto tensor_info(const std::string& name, int elem_type, const std::vector<int64_t>& dims,
                                 const std::vector<std::pair<int, std::string>>& params) {
  onnx::ValueInfoProto vi;
  vi.set_name(name);
  auto* tt = vi.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  auto* shape = tt->mutable_shape();
  for (size_t i = 0; i < dims.size(); ++i) {
    auto* d = shape->add_dim();
    for (const auto& [at, p] : params)
      if (at == static_cast<int>(i)) d->set_dim_param(p);
    if (dims[i] >= 0) d->set_dim_value(dims[i]);
  }
  return vi;
}

onnx::ValueInfoProto untyped_info(const std::string& name) {
  onnx::ValueInfoProto vi;
  vi.set_name(name);
  return vi;
}

void add_ints(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

void add_int(onnx::NodeProto& n, const std::string& name, int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

}  // namespace onnxforge::test

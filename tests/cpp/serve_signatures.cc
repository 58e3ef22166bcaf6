// Runs a SavedModel's signatures the way TF Serving's model server does, from C++.
//
// The closest thing to tensorflow_model_server that builds here: tensorflow::LoadSavedModel (the
// session bundle: the MetaGraph imported, the saver's restore op and the init op run), then
// Session::Run by the tensor names of each request's SignatureDef. TF Text's kernels are
// loaded first from its op libraries, as the model server links @org_tensorflow_text's ops_lib,
// with tensorflow::LoadDynamicLibrary: what the C API's TF_LoadLibrary calls (the pip wheel
// exports TF_LoadLibrary only from its Python extension, the C++ function from
// libtensorflow_framework).
//
// Usage: serve_signatures EXPORT_DIR REQUESTS_DIR RESPONSES_DIR [OP_LIBRARY.so ...]
//
// REQUESTS_DIR holds one directory per request: a file `signature` (the signature's name) and
// one serialized tensorflow.TensorProto per input, `<input key>.pb`. For each, RESPONSES_DIR/<same
// name>/ gets one `<output key>.pb` per output, or a file `status` ("<code> <message>") when
// Session::Run fails. Exit code 0 when the model loaded and every request was answered (an
// error status is an answer), 1 otherwise. Built and run by tests/test_export.py.

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "tensorflow/cc/saved_model/loader.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor.pb.h"
#include "tensorflow/core/platform/env.h"
#include "tensorflow/core/protobuf/meta_graph.pb.h"
#include "tensorflow/core/public/session.h"

namespace tensorflow {
// tensorflow/core/framework/load_library.cc (no installed header declares it)
absl::Status LoadDynamicLibrary(const char* library_filename, void** result, const void** buf,
                                size_t* len);
}  // namespace tensorflow

namespace {

int Fail(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "serve_signatures: %s: %s\n", what.c_str(), status.ToString().c_str());
  return 1;
}

std::string Join(const std::string& a, const std::string& b) { return a + "/" + b; }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s EXPORT_DIR REQUESTS_DIR RESPONSES_DIR [OP_LIBRARY.so ...]\n",
                 argv[0]);
    return 2;
  }
  const std::string export_dir = argv[1], requests_dir = argv[2], responses_dir = argv[3];
  for (int i = 4; i < argc; ++i) {
    void* handle = nullptr;
    const void* op_list = nullptr;
    size_t op_list_length = 0;
    absl::Status status =
        tensorflow::LoadDynamicLibrary(argv[i], &handle, &op_list, &op_list_length);
    if (!status.ok()) return Fail(std::string("loading ") + argv[i], status);
  }

  tensorflow::SavedModelBundle bundle;
  absl::Status status = tensorflow::LoadSavedModel(tensorflow::SessionOptions(),
                                                   tensorflow::RunOptions(), export_dir,
                                                   {"serve"}, &bundle);
  if (!status.ok()) return Fail("LoadSavedModel(" + export_dir + ")", status);
  const auto& signatures = bundle.meta_graph_def.signature_def();
  std::printf("loaded %s: %d signatures\n", export_dir.c_str(),
              static_cast<int>(signatures.size()) - (signatures.count("__saved_model_init_op") ? 1 : 0));

  tensorflow::Env* env = tensorflow::Env::Default();
  std::vector<std::string> requests;
  status = env->GetChildren(requests_dir, &requests);
  if (!status.ok()) return Fail("reading " + requests_dir, status);
  for (const std::string& request : requests) {
    const std::string request_dir = Join(requests_dir, request);
    const std::string response_dir = Join(responses_dir, request);
    std::string name;
    status = tensorflow::ReadFileToString(env, Join(request_dir, "signature"), &name);
    if (!status.ok()) return Fail("reading the signature of " + request_dir, status);
    auto found = signatures.find(name);
    if (found == signatures.end()) {
      return Fail(request_dir, absl::NotFoundError("no signature " + name));
    }
    const tensorflow::SignatureDef& signature = found->second;

    // the inputs, fed by the tensor names the SignatureDef maps their keys to
    std::vector<std::pair<std::string, tensorflow::Tensor>> feeds;
    for (const auto& [key, info] : signature.inputs()) {
      std::string bytes;
      status = tensorflow::ReadFileToString(env, Join(request_dir, key + ".pb"), &bytes);
      if (!status.ok()) return Fail("reading input " + key + " of " + request_dir, status);
      tensorflow::TensorProto proto;
      tensorflow::Tensor tensor;
      if (!proto.ParseFromString(bytes) || !tensor.FromProto(proto)) {
        return Fail(request_dir, absl::InvalidArgumentError("bad TensorProto for " + key));
      }
      feeds.emplace_back(info.name(), tensor);
    }
    std::vector<std::string> keys, fetches;
    for (const auto& [key, info] : signature.outputs()) {
      keys.push_back(key);
      fetches.push_back(info.name());
    }

    std::vector<tensorflow::Tensor> outputs;
    status = bundle.session->Run(feeds, fetches, {}, &outputs);
    status.Update(env->RecursivelyCreateDir(response_dir));
    if (!env->IsDirectory(response_dir).ok()) return Fail("creating " + response_dir, status);
    if (!status.ok()) {
      std::string line = std::to_string(static_cast<int>(status.code())) + " " +
                         std::string(status.message());
      absl::Status written = tensorflow::WriteStringToFile(env, Join(response_dir, "status"), line);
      if (!written.ok()) return Fail("writing " + response_dir, written);
      continue;
    }
    for (size_t i = 0; i < keys.size(); ++i) {
      tensorflow::TensorProto proto;
      outputs[i].AsProtoField(&proto);
      absl::Status written = tensorflow::WriteStringToFile(
          env, Join(response_dir, keys[i] + ".pb"), proto.SerializeAsString());
      if (!written.ok()) return Fail("writing " + response_dir, written);
    }
  }
  std::printf("answered %d requests\n", static_cast<int>(requests.size()));
  return 0;
}

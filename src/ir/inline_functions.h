#pragma once
// Model-local functions (FunctionProto, what torch's export_modules_as_functions writes) expanded
// into their callers: the one inliner the runtime (at plan time, on Model::clone()) and
// `optimize --inline-functions` (in place) share.
//
// Each call node of a local function, in the main graph and in every If/Loop/Scan body, becomes
// the function's body: formal inputs read the call's inputs (an omitted optional input stays
// absent), formal outputs are written into the call's own output values (so readers, graph
// outputs and captures of them are untouched), attribute references (`ref_attr_name`) take the
// caller's attribute, else the function's default (attribute_proto, IR 9), else the attribute is
// left out as ONNX says. Internal values get fresh names, inlined nodes are named
// "<call node name>/<body node name>" and keep the caller's hierarchy tags, so attribution and
// profiles still read by module. Calls the body makes are expanded in turn (nested functions),
// subgraphs in the body are copied with their captures rebound.
//
// Opset imports: inlined nodes run at the importing graph's (the model's) version of their
// domain, so a function importing another version of a domain the model imports is refused,
// naming both versions (passes/inline.h upgrades such bodies first where it can). A domain only
// the function imports is added to the model's imports.
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace onnxforge {

// FunctionProto.opset_import (kept verbatim in Function::fields): domain, version and the index
// of the field holding it.
struct FunctionImport {
  std::string domain;  // "" for the default domain ("ai.onnx" is read as "")
  int64_t version = 0;
  size_t field = 0;
};
std::vector<FunctionImport> function_imports(const Function& f);
// Sets the function's import of `domain` ("" or "ai.onnx": the default domain) to `version`,
// replacing the field that held it or adding one (the opset upgrade raises function bodies).
void set_function_import(Function& f, std::string_view domain, int64_t version);

// The local function node `n` of `g` calls, or nullptr (an operator).
const Function* called_function(const Model& m, const Graph& g, NodeId n);
// Whether a graph that runs (the main graph, its bodies; not a function body) calls a local function.
bool calls_functions(const Model& m);

// The function whose body `g` is or lies in (an If branch inside a body), or nullptr.
const Function* function_of(const Model& m, const Graph& g);
// The calls of local function `f` in graphs that are not detached (function bodies included).
std::vector<std::pair<GraphId, NodeId>> calls_of(const Model& m, const Function& f);
// How many calls of `f` one run of the model reaches, as written (a call in an If branch or a
// Loop body counts once; a call from a function body counts as often as that body is reached).
int64_t reached_calls(const Model& m, const Function& f);

struct InlineOptions {
  // Drop the functions no graph calls afterwards (their bodies are detached) and the imports of
  // their domains that no node uses any more: what `optimize --inline-functions` writes.
  bool drop_functions = true;
};

struct InlineReport {
  size_t calls = 0;    // call nodes expanded (nested calls included)
  int64_t nodes = 0;   // net change of the nodes that run (bodies in, call nodes out)
  size_t dropped = 0;  // functions dropped
};

// Expands every call in place. Throws onnxforge::Error (bad input: exit 2) naming the function
// and the call node when it cannot: an opset mismatch, a tensor or graph default it cannot
// decode, calls nested deeper than a model built in memory could justify (recursion).
InlineReport inline_functions(Model& m, const InlineOptions& options = {});

}  // namespace onnxforge

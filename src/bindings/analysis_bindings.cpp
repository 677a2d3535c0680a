// analysis_bindings.cpp: the analysis pass and its results as typed Python
// objects: Figures, Totals, TypeGroup, FunctionGroup, ThreadGroup, Node, Analysis.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>

#include "bindings.hpp"
#include "core/analysis.hpp"
#include "core/exports/exports.hpp"
#include "core/exports/heaptrack.hpp"

namespace py = pybind11;
using heaptype::core::Analysis;
using heaptype::core::AnalysisOptions;
using heaptype::core::Figures;
using heaptype::core::MergedTree;

namespace heaptype {
namespace bindings {
namespace {

// An analysis with what it reads from, kept alive by every result object.
struct Session {
  std::shared_ptr<format::ProfileFile> file;
  std::shared_ptr<core::CodeNames> names;
  std::unique_ptr<Analysis> analysis;

  uint64_t us(uint64_t ticks) const { return ticks * analysis->clock_tick_ns() / 1000; }
};
using SessionPtr = std::shared_ptr<Session>;

// Figures with times in microseconds.
struct FiguresOut {
  Figures f;
  uint64_t peak_time_us;
};

FiguresOut out(const Session& s, const Figures& f) { return FiguresOut{f, s.us(f.peak_time)}; }
FiguresOut out_figures(const Session& s, const Figures& f) { return out(s, f); }

struct TotalsOut {
  core::Totals t;
  uint64_t peak_time_us;
  uint64_t duration_us;
  uint64_t stack_peak_time_us;
};

struct TypeGroupOut {
  SessionPtr s;
  uint32_t index;
  const core::TypeGroup& g() const { return s->analysis->types()[index]; }
};

struct FunctionGroupOut {
  SessionPtr s;
  uint32_t index;
  const core::FunctionGroup& g() const { return s->analysis->functions()[index]; }
};

struct ThreadGroupOut {
  SessionPtr s;
  uint32_t index;
  const core::ThreadGroup& g() const { return s->analysis->threads()[index]; }
};

struct NodeOut {
  SessionPtr s;
  bool bottom_up;
  uint32_t id;
  const MergedTree& tree() const { return bottom_up ? s->analysis->bottom_up_tree() : s->analysis->tree(); }
  const MergedTree::Node& node() const { return tree().node(id); }
};

bool same_figures(const Figures& a, const Figures& b) {
  return a.allocations == b.allocations && a.objects == b.objects && a.bytes == b.bytes &&
         a.live_bytes == b.live_bytes && a.live_blocks == b.live_blocks && a.peak_bytes == b.peak_bytes &&
         a.temporary_allocations == b.temporary_allocations;
}

bool same_totals(const TotalsOut& a, const TotalsOut& b) {
  return same_figures(a.t, b.t) && a.peak_time_us == b.peak_time_us && a.t.frees == b.t.frees &&
         a.t.unmatched_frees == b.t.unmatched_frees && a.t.peak_live_blocks == b.t.peak_live_blocks &&
         a.duration_us == b.duration_us;
}

py::dict figures_dict(const FiguresOut& o) {
  py::dict d;
  d["allocations"] = o.f.allocations;
  d["objects"] = o.f.objects;
  d["bytes"] = o.f.bytes;
  d["peak_bytes"] = o.f.peak_bytes;
  d["peak_time_us"] = o.peak_time_us;
  d["live_bytes"] = o.f.live_bytes;
  d["live_blocks"] = o.f.live_blocks;
  d["temporary_allocations"] = o.f.temporary_allocations;
  return d;
}

// Read-only Figures attributes on any class whose object gives a FiguresOut.
template <class Class, class Get>
void figure_attributes(Class& cls, Get get) {
  cls.def_property_readonly("allocations", [get](const typename Class::type& o) { return get(o).f.allocations; })
      .def_property_readonly("objects", [get](const typename Class::type& o) { return get(o).f.objects; })
      .def_property_readonly("bytes", [get](const typename Class::type& o) { return get(o).f.bytes; })
      .def_property_readonly("peak_bytes", [get](const typename Class::type& o) { return get(o).f.peak_bytes; })
      .def_property_readonly("peak_time_us", [get](const typename Class::type& o) { return get(o).peak_time_us; })
      .def_property_readonly("live_bytes", [get](const typename Class::type& o) { return get(o).f.live_bytes; })
      .def_property_readonly("live_blocks", [get](const typename Class::type& o) { return get(o).f.live_blocks; })
      .def_property_readonly("temporary_allocations",
                             [get](const typename Class::type& o) { return get(o).f.temporary_allocations; });
}

const char* kind_name(MergedTree::Kind kind) {
  switch (kind) {
    case MergedTree::kRoot:
      return "root";
    case MergedTree::kFrame:
      return "frame";
    case MergedTree::kType:
      return "type";
  }
  return "?";
}

py::object node_name(const NodeOut& n) {
  const MergedTree::Node& node = n.node();
  const Analysis& a = *n.s->analysis;
  switch (node.kind) {
    case MergedTree::kRoot:
      return py::str("(root)");
    case MergedTree::kFrame:
      return name_text(a.strings().get(node.label));
    case MergedTree::kType:
      return name_text(a.strings().get(a.types()[node.label].label));
  }
  return py::none();
}

std::vector<NodeOut> node_children(const NodeOut& n) {
  std::vector<NodeOut> out;
  for (uint32_t child : n.tree().children()[n.id]) out.push_back(NodeOut{n.s, n.bottom_up, child});
  return out;
}

// `live_only`: the leaves with blocks live at the end (a test binary's profile has
// millions of leaves and a handful of leaks: frames are made only for those).
py::list tree_leaves(const SessionPtr& s, const MergedTree& tree, bool live_only) {
  const Analysis& a = *s->analysis;
  py::list out;
  std::vector<uint32_t> path;
  for (uint32_t id = 1; id < tree.size(); ++id) {
    const MergedTree::Node& leaf = tree.node(id);
    if (leaf.kind != MergedTree::kType) continue;
    if (live_only && leaf.total.live_blocks == 0) continue;
    path.clear();
    for (uint32_t n = leaf.parent; n != 0 && n != core::kNone; n = tree.node(n).parent) path.push_back(n);
    py::list frames;
    for (auto it = path.rbegin(); it != path.rend(); ++it) frames.append(name_text(a.strings().get(tree.node(*it).label)));
    out.append(py::make_tuple(frames, TypeGroupOut{s, leaf.label}, out_figures(*s, leaf.total)));
  }
  return out;
}

py::list type_paths(const SessionPtr& s, bool live_only) { return tree_leaves(s, s->analysis->tree(), live_only); }

py::list live_type_paths(const SessionPtr& s) {
  const MergedTree* tree = s->analysis->live_tree();
  if (!tree) throw py::value_error("the paths of the live blocks are not kept by a pass with a lifetime filter");
  return tree_leaves(s, *tree, true);
}

py::list path_names(const Analysis& a, uint32_t path) {
  py::list frames;
  if (path == core::kNone) return frames;
  for (const core::PathFrame* f : a.call_paths().frames(path)) frames.append(name_text(a.strings().get(f->name)));
  return frames;
}

const char* family_name(uint64_t family, bool release) {
  switch (family) {
    case 0:
      return release ? "free()" : "malloc()";
    case 1:
      return release ? "delete" : "new";
    case 2:
      return release ? "delete[]" : "new[]";
  }
  return "?";
}

py::list findings_list(const Session& s) {
  const Analysis& a = *s.analysis;
  py::list out;
  for (const core::Finding& f : a.findings()) {
    py::dict d;
    bool type_mismatch = f.kind == static_cast<uint64_t>(format::FindingKind::kMismatchedDelete);
    d["kind"] = type_mismatch ? "mismatched_delete" : f.kind == 1 ? "mismatched_free" : "unknown";
    d["allocated"] = name_text(a.strings().get(f.allocated));
    d["allocated_bytes"] = f.allocated_bytes;
    if (type_mismatch) {
      d["deleted"] = name_text(a.strings().get(f.deleted));
      d["deleted_bytes"] = f.deleted_bytes;
    } else {
      d["allocated_with"] = family_name(f.allocated_with, false);
      d["released_with"] = family_name(f.released_with, true);
    }
    d["count"] = f.count;
    d["stack"] = path_names(a, f.path);
    d["allocation_stack"] = path_names(a, f.allocation_path);
    out.append(d);
  }
  return out;
}

py::object node_child(const NodeOut& n, const std::string& name) {
  for (uint32_t child : n.tree().children()[n.id]) {
    NodeOut c{n.s, n.bottom_up, child};
    if (node_name(c).cast<std::string>() == name) return py::cast(c);
  }
  return py::none();
}

AnalysisOptions::Series series_kind(const std::string& name) {
  using Series = AnalysisOptions::Series;
  if (name.empty()) return Series::kNone;
  if (name == "type") return Series::kType;
  if (name == "thread") return Series::kThread;
  if (name == "function") return Series::kFunction;
  if (name == "callpath") return Series::kCallPath;
  throw py::value_error("unknown timeline grouping " + name + ": use type, thread, function or callpath");
}

// The groupings of a pass's timelines: one name ("type") or several (["type", "thread"]).
std::vector<AnalysisOptions::Series> series_kinds(const py::object& names) {
  std::vector<AnalysisOptions::Series> kinds;
  if (py::isinstance<py::str>(names)) {
    kinds.push_back(series_kind(names.cast<std::string>()));
  } else {
    for (const std::string& name : names.cast<std::vector<std::string>>()) kinds.push_back(series_kind(name));
  }
  return kinds;
}

// The timeline of one grouping of the pass (any: its only one): the groups asked for
// (by id), and what the others held.
py::object timeline_dict(const Session& s, const std::vector<uint32_t>& groups, const std::string& by) {
  const core::Timeline* t = s.analysis->timeline(series_kind(by));
  if (!t) return py::none();
  std::vector<uint64_t> times;
  std::vector<int64_t> totals, stack;
  for (size_t k = 0; k < t->points(); ++k) {
    times.push_back(s.us(t->time(k)));
    totals.push_back(t->total(k));
    stack.push_back(t->stack(k));
  }
  std::vector<int64_t> other = totals;
  std::vector<std::vector<int64_t>> series;
  for (uint32_t id : groups) {
    series.push_back(t->series(id));
    for (size_t k = 0; k < other.size(); ++k) other[k] -= series.back()[k];
  }
  py::dict d;
  d["times_us"] = times;
  d["totals"] = totals;
  d["series"] = series;
  d["other"] = other;
  d["stack"] = stack;
  return std::move(d);
}

// One span's figures from two cumulative snapshots: counts are differences, the
// peak and live figures the span's own.
py::dict span_figures(const Session& s, const Figures& now, const Figures* before) {
  py::dict d;
  // Signed: a block typed late leaves its untyped group, whose count then falls.
  auto delta = [&](uint64_t Figures::*field) {
    return static_cast<int64_t>(now.*field) - static_cast<int64_t>(before ? before->*field : 0);
  };
  d["allocations"] = delta(&Figures::allocations);
  d["objects"] = delta(&Figures::objects);
  d["bytes"] = delta(&Figures::bytes);
  d["temporary_allocations"] = delta(&Figures::temporary_allocations);
  d["peak_bytes"] = now.peak_bytes;
  d["peak_time_us"] = s.us(now.peak_time);
  d["live_bytes"] = now.live_bytes;
  d["live_blocks"] = now.live_blocks;
  return d;
}

py::dict indexed_spans(const Session& s, const std::vector<Figures>& now, const std::vector<Figures>* before) {
  py::dict out;
  for (size_t i = 0; i < now.size(); ++i)
    out[py::int_(i)] = span_figures(s, now[i], before && i < before->size() ? &(*before)[i] : nullptr);
  return out;
}

py::list bucket_list(const Session& s) {
  py::list out;
  const auto& buckets = s.analysis->buckets();
  for (size_t k = 0; k < buckets.size(); ++k) {
    const core::BucketSnapshot& now = buckets[k];
    const core::BucketSnapshot* before = k ? &buckets[k - 1] : nullptr;
    py::dict d;
    d["selected"] = span_figures(s, now.selected, before ? &before->selected : nullptr);
    d["types"] = indexed_spans(s, now.types, before ? &before->types : nullptr);
    d["function_self"] = indexed_spans(s, now.function_self, before ? &before->function_self : nullptr);
    d["function_total"] = indexed_spans(s, now.function_total, before ? &before->function_total : nullptr);
    py::list nodes;
    for (size_t i = 0; i < now.nodes.size(); ++i)
      nodes.append(span_figures(s, now.nodes[i], before ? &before->nodes[i] : nullptr));
    d["nodes"] = nodes;
    out.append(d);
  }
  return out;
}

// `heaptrack_write`: when not None, the pass also writes heaptrack's data file, calling it
// with each piece of text (bytes) in order.
SessionPtr run_analysis(std::shared_ptr<format::ProfileFile> file, std::shared_ptr<core::CodeNames> names,
                        AnalysisOptions options, bool progress, const py::object& heaptrack_write = py::none(),
                        const std::string& heaptrack_command = "") {
  auto s = std::make_shared<Session>();
  s->file = std::move(file);
  s->names = std::move(names);
  s->analysis.reset(new Analysis(*s->file, s->names.get(), std::move(options)));
  std::unique_ptr<core::HeaptrackWriter> heaptrack;
  if (!heaptrack_write.is_none()) {
    heaptrack.reset(new core::HeaptrackWriter(*s->analysis, heaptrack_command, [&heaptrack_write](const std::string& text) {
      py::gil_scoped_acquire acquire;
      heaptrack_write(py::bytes(text));
    }));
    s->analysis->observe(heaptrack.get());
  }
  py::gil_scoped_release release;
  s->analysis->run(progress ? core::stderr_progress() : core::ProgressFn());
  if (heaptrack) {
    heaptrack->finish();
    s->analysis->observe(nullptr);
  }
  return s;
}

}  // namespace

// (start, limit, offset, path, build id) of one executable mapping, as Python hands it.
using MappingTuple = std::tuple<uint64_t, uint64_t, uint64_t, std::string, std::string>;

static core::PprofInfo pprof_info(const Session& s, const std::vector<MappingTuple>& mappings, const std::string& comment) {
  core::PprofInfo info;
  for (const auto& m : mappings)
    info.mappings.push_back(
        core::ExportMapping{std::get<0>(m), std::get<1>(m), std::get<2>(m), std::get<3>(m), std::get<4>(m)});
  info.comment = comment;
  info.time_unix_ns = s.file->header().start_unix_ns;
  return info;
}

void bind_analysis(py::module_& m) {
  auto figures = py::class_<FiguresOut>(m, "Figures", R"doc(What was counted for a group of allocations.

allocations, objects (T[n] counts n), bytes (allocated in all), peak_bytes (the most
bytes of the group live at one moment) and peak_time_us (when it was first reached),
live_bytes and live_blocks (at the end: never freed), temporary_allocations (freed as
the program's next allocation event, heaptrack's rule: see core/temporaries.hpp).)doc");
  figure_attributes(figures, [](const FiguresOut& o) -> const FiguresOut& { return o; });
  figures.def("as_dict", &figures_dict)
      .def("__eq__", [](const FiguresOut& a, const FiguresOut& b) {
        return same_figures(a.f, b.f) && a.peak_time_us == b.peak_time_us;
      })
      .def("__repr__", [](const FiguresOut& o) {
        return "Figures(allocations=" + std::to_string(o.f.allocations) + ", bytes=" + std::to_string(o.f.bytes) +
               ", peak_bytes=" + std::to_string(o.f.peak_bytes) + ", live_bytes=" + std::to_string(o.f.live_bytes) +
               ")";
      });

  auto totals = py::class_<TotalsOut>(m, "Totals", "Figures of the whole profile, with its frees and duration.");
  figure_attributes(totals, [](const TotalsOut& o) { return FiguresOut{o.t, o.peak_time_us}; });
  totals.def("__eq__", &same_totals)
      .def_property_readonly("frees", [](const TotalsOut& o) { return o.t.frees; })
      .def_property_readonly("unmatched_frees", [](const TotalsOut& o) { return o.t.unmatched_frees; },
                             "Frees of blocks whose allocation the profile does not hold.")
      .def_property_readonly("peak_live_blocks", [](const TotalsOut& o) { return o.t.peak_live_blocks; })
      .def_property_readonly("duration_us", [](const TotalsOut& o) { return o.duration_us; })
      .def_property_readonly("events", [](const TotalsOut& o) { return o.t.events; }, "Events applied.")
      .def_property_readonly("peak_event", [](const TotalsOut& o) { return o.t.peak_event; },
                             "The event (counted from 1) at which the kept allocations peaked.")
      .def_property_readonly("stack_peak_bytes", [](const TotalsOut& o) { return o.t.stack_peak_bytes; },
                             "The deepest the threads' stacks went together, in bytes (0: not recorded).")
      .def_property_readonly("stack_peak_time_us", [](const TotalsOut& o) { return o.stack_peak_time_us; })
      .def("as_dict", [](const TotalsOut& o) {
        py::dict d = figures_dict(FiguresOut{o.t, o.peak_time_us});
        d["frees"] = o.t.frees;
        d["unmatched_frees"] = o.t.unmatched_frees;
        d["peak_live_blocks"] = o.t.peak_live_blocks;
        d["duration_us"] = o.duration_us;
        d["stack_peak_bytes"] = o.t.stack_peak_bytes;
        d["stack_peak_time_us"] = o.stack_peak_time_us;
        return d;
      });

  auto type_group = py::class_<TypeGroupOut>(m, "TypeGroup", "One type's figures.");
  figure_attributes(type_group, [](const TypeGroupOut& o) { return out(*o.s, o.g().figures); });
  type_group
      .def_property_readonly("type",
                             [](const TypeGroupOut& o) -> py::object {
                               if (!o.g().name) return py::none();
                               return name_text(o.s->analysis->strings().get(o.g().name));
                             },
                             "The C++ type, or None for allocations with no type.")
      .def_property_readonly("label",
                             [](const TypeGroupOut& o) {
                               return name_text(o.s->analysis->strings().get(o.g().label));
                             },
                             "As reports show it: 'T', 'T (inferred)' or '(untyped)'.")
      .def_property_readonly("inferred", [](const TypeGroupOut& o) { return o.g().inferred; },
                             "The type was read from the allocator frames at the call site.")
      .def_property_readonly("type_tag", [](const TypeGroupOut& o) { return o.g().type_tag; })
      .def_property_readonly("peak_at_heap_peak", [](const TypeGroupOut& o) { return o.g().peak_at_heap_peak; },
                             "Aggregated profiles: the peak is what it had live at the heap's peak, not its own.")
      .def_property_readonly("id", [](const TypeGroupOut& o) { return o.index; }, "Its number in this analysis.")
      .def_property_readonly("size_histogram",
                             [](const TypeGroupOut& o) {
                               std::vector<std::pair<uint64_t, uint64_t>> out;
                               if (const core::TypeHistograms* h = o.s->analysis->histograms(o.index))
                                 for (size_t k = 0; k < core::kSizeBuckets; ++k)
                                   if (h->sizes[k]) out.push_back({k ? uint64_t{1} << k : 1, h->sizes[k]});
                               return out;
                             },
                             "[(largest size of the bucket, allocations)]: block sizes in powers of two.")
      .def_property_readonly("lifetime_histogram",
                             [](const TypeGroupOut& o) {
                               static const char* const kLabels[] = {"<1us", "<10us", "<100us", "<1ms", "<10ms",
                                                                     "<100ms", "<1s", ">=1s", "never freed"};
                               py::dict d;
                               const core::TypeHistograms* h = o.s->analysis->histograms(o.index);
                               for (size_t k = 0; k < core::kLifetimeBuckets; ++k) d[kLabels[k]] = h ? h->lifetimes[k] : 0;
                               return d;
                             },
                             "Blocks by lifetime (profiles recorded with addresses, and addresses=True).")
      .def("__eq__",
           [](const TypeGroupOut& a, const TypeGroupOut& b) {
             return a.s->analysis->strings().get(a.g().label) == b.s->analysis->strings().get(b.g().label) &&
                    a.g().inferred == b.g().inferred && same_figures(a.g().figures, b.g().figures);
           })
      .def("__repr__",
           [](const TypeGroupOut& o) {
             return "<TypeGroup " + o.s->analysis->strings().get(o.g().label) + ": " +
                    std::to_string(o.g().figures.allocations) + " allocations, peak " +
                    std::to_string(o.g().figures.peak_bytes) + ">";
           })
      .def_property_readonly("figures", [](const TypeGroupOut& o) { return out(*o.s, o.g().figures); });

  py::class_<FunctionGroupOut>(m, "FunctionGroup",
                               "A function's figures: `self` the allocations it made itself, `total` those "
                               "made while it was on the stack (once per recursion).")
      .def_property_readonly("function",
                             [](const FunctionGroupOut& o) {
                               return name_text(o.s->analysis->strings().get(o.g().name));
                             })
      .def_property_readonly("self", [](const FunctionGroupOut& o) { return out(*o.s, o.g().self); })
      .def_property_readonly("id", [](const FunctionGroupOut& o) { return o.index; })
      .def_property_readonly("total", [](const FunctionGroupOut& o) { return out(*o.s, o.g().total); });

  auto thread_group = py::class_<ThreadGroupOut>(m, "ThreadGroup", "The figures of one thread's allocations.");
  figure_attributes(thread_group, [](const ThreadGroupOut& o) { return out(*o.s, o.g().figures); });
  thread_group.def_property_readonly("thread", [](const ThreadGroupOut& o) { return o.g().thread; })
      .def_property_readonly("id", [](const ThreadGroupOut& o) { return o.index; })
      .def_property_readonly("stack_peak_bytes", [](const ThreadGroupOut& o) { return o.g().stack_peak_bytes; },
                             "The deepest its stack went, in bytes (0: not recorded).")
      .def_property_readonly("figures", [](const ThreadGroupOut& o) { return out(*o.s, o.g().figures); });

  py::class_<NodeOut>(m, "Node", "A node of a merged call tree: a frame, a type (the leaves), or the root.")
      .def_property_readonly("name", &node_name, "The frame's function, the type's label, or '(root)'.")
      .def_property_readonly("kind", [](const NodeOut& n) { return kind_name(n.node().kind); })
      .def_property_readonly("inlined", [](const NodeOut& n) { return n.node().inlined; },
                             "The frame was inlined at a call site (DWARF) and not seen by the hooks.")
      .def_property_readonly("depth", [](const NodeOut& n) { return n.node().depth; })
      .def_property_readonly("id", [](const NodeOut& n) { return n.id; })
      .def_property_readonly("total", [](const NodeOut& n) { return out(*n.s, n.node().total); },
                             "Allocations made under this node.")
      .def_property_readonly("self",
                             [](const NodeOut& n) {
                               const MergedTree::Node& node = n.node();
                               return out(*n.s, node.kind == MergedTree::kType ? node.total : node.self);
                             },
                             "Allocations whose path ends at this frame.")
      .def_property_readonly("children", &node_children)
      .def("child", &node_child, py::arg("name"), "The child frame (or type leaf) of that name, or None.")
      .def("find",
           [](const NodeOut& n, py::args names) -> py::object {
             NodeOut node = n;
             for (py::handle name : names) {
               py::object next = node_child(node, name.cast<std::string>());
               if (next.is_none()) return py::none();
               node = next.cast<NodeOut>();
             }
             return py::cast(node);
           },
           "The node reached by following children of these names, or None.")
      .def("__repr__", [](const NodeOut& n) {
        return "<Node " + std::string(kind_name(n.node().kind)) + " " + node_name(n).cast<std::string>() + ">";
      })
      .def_property_readonly("parent", [](const NodeOut& n) -> py::object {
        uint32_t parent = n.node().parent;
        if (parent == core::kNone) return py::none();
        return py::cast(NodeOut{n.s, n.bottom_up, parent});
      });

  py::class_<Session, SessionPtr>(m, "Analysis", "One pass over a profile; see AnalysisOptions in analysis.hpp.")
      .def(py::init([](std::shared_ptr<format::ProfileFile> file, std::shared_ptr<core::CodeNames> names,
                       bool call_tree, bool path_leaves, bool bottom_up, bool functions, bool inlined, bool infer,
                       std::vector<std::string> types, std::vector<std::string> functions_on_path,
                       std::vector<uint32_t> threads, uint64_t min_size, uint64_t max_size, py::object begin_us,
                       py::object end_us, uint64_t stop_after_events, const py::object& timeline,
                       size_t timeline_points, bool addresses,
                       std::vector<uint64_t> bucket_ends_us, std::vector<uint32_t> bucket_nodes,
                       py::object min_lifetime_us, py::object max_lifetime_us, bool progress,
                       py::object heaptrack_write, const std::string& heaptrack_command) {
             AnalysisOptions options;
             options.call_tree = call_tree;
             options.path_leaves = path_leaves;
             options.bottom_up = bottom_up;
             options.functions = functions;
             options.inlined = inlined;
             options.infer = infer;
             options.types = std::move(types);
             options.functions_on_path = std::move(functions_on_path);
             options.threads = std::move(threads);
             options.min_size = min_size;
             options.max_size = max_size;
             uint64_t tick_ns = file->header().clock_tick_ns ? file->header().clock_tick_ns : 1000;
             // A microsecond is [its first tick, its last tick]: an inclusive end takes all of it.
             constexpr uint64_t kLastUs = UINT64_MAX / 1000 - 1;  // later: the end of time
             auto first_tick = [tick_ns](uint64_t us) { return us > kLastUs ? UINT64_MAX : us * 1000 / tick_ns; };
             auto last_tick = [tick_ns](uint64_t us) {
               return us > kLastUs ? UINT64_MAX : ((us + 1) * 1000 - 1) / tick_ns;
             };
             if (!begin_us.is_none()) options.window_begin = first_tick(begin_us.cast<uint64_t>());
             if (!end_us.is_none()) options.window_end = last_tick(end_us.cast<uint64_t>());
             options.stop_after_events = stop_after_events;
             options.timelines = series_kinds(timeline);
             options.timeline_points = timeline_points;
             options.addresses = addresses;
             for (uint64_t end : bucket_ends_us) options.bucket_ends.push_back(last_tick(end));
             options.bucket_nodes = std::move(bucket_nodes);
             // A lifetime of n ticks is n * tick_ns nanoseconds: at least the minimum, under
             // the microsecond after the maximum.
             auto ticks_at_least = [tick_ns](uint64_t us) {
               return us > kLastUs ? UINT64_MAX : (us * 1000 + tick_ns - 1) / tick_ns;
             };
             if (!min_lifetime_us.is_none()) options.min_lifetime = ticks_at_least(min_lifetime_us.cast<uint64_t>());
             if (!max_lifetime_us.is_none()) options.max_lifetime = last_tick(max_lifetime_us.cast<uint64_t>());
             return run_analysis(std::move(file), std::move(names), std::move(options), progress, heaptrack_write,
                                 heaptrack_command);
           }),
           py::arg("file"), py::arg("names"), py::kw_only(), py::arg("call_tree") = false,
           py::arg("path_leaves") = false, py::arg("bottom_up") = false, py::arg("functions") = false,
           py::arg("inlined") = false,
           py::arg("infer") = true, py::arg("types") = std::vector<std::string>{},
           py::arg("functions_on_path") = std::vector<std::string>{}, py::arg("threads") = std::vector<uint32_t>{},
           py::arg("min_size") = 0, py::arg("max_size") = UINT64_MAX, py::arg("begin_us") = py::none(),
           py::arg("end_us") = py::none(), py::arg("stop_after_events") = 0, py::arg("timeline") = "",
           py::arg("timeline_points") = 2000,
           py::arg("addresses") = false, py::arg("bucket_ends_us") = std::vector<uint64_t>{},
           py::arg("bucket_nodes") = std::vector<uint32_t>{}, py::arg("min_lifetime_us") = py::none(),
           py::arg("max_lifetime_us") = py::none(), py::arg("progress") = false,
           py::arg("heaptrack_write") = py::none(), py::arg("heaptrack_command") = "")
      .def("buckets", &bucket_list,
           "Per span of bucket_ends_us: {selected, types: {id: figures}, function_self, function_total, nodes: "
           "[figures]}, each figures a dict of that span: counts made in it, its peak, live at its end.")
      .def("live_blocks",
           [](const SessionPtr& s) {
             std::vector<core::LiveBlock> blocks = s->analysis->live_blocks();
             py::list out;
             for (const core::LiveBlock& b : blocks)
               out.append(py::make_tuple(b.address, b.size, TypeGroupOut{s, b.type_group}));
             return out;
           },
           "(address, size, TypeGroup) of the blocks live when the pass stopped, by address (addresses=True).")
      .def("timeline", &timeline_dict, py::arg("groups") = std::vector<uint32_t>{}, py::arg("by") = "",
           "{times_us, totals, series: [[bytes...] per group id asked for], other: the rest, stack}: the "
           "timeline of grouping `by` (\"\": the pass's first) of a pass made with timeline=GROUPING or "
           "[GROUPING, ...] (every group of each is followed, in the one pass); None when not followed.")
      .def_property_readonly("totals",
                             [](const Session& s) {
                               const core::Totals& t = s.analysis->totals();
                               return TotalsOut{t, s.us(t.peak_time), s.us(t.duration), s.us(t.stack_peak_time)};
                             })
      .def_property_readonly("selected", [](const Session& s) { return out(s, s.analysis->selected()); },
                             "Figures of the allocations the filters keep.")
      .def_property_readonly("types",
                             [](const SessionPtr& s) {
                               std::vector<TypeGroupOut> v;
                               for (uint32_t i = 0; i < s->analysis->types().size(); ++i) v.push_back({s, i});
                               return v;
                             })
      .def_property_readonly("functions",
                             [](const SessionPtr& s) {
                               std::vector<FunctionGroupOut> v;
                               for (uint32_t i = 0; i < s->analysis->functions().size(); ++i) v.push_back({s, i});
                               return v;
                             })
      .def_property_readonly("threads",
                             [](const SessionPtr& s) {
                               std::vector<ThreadGroupOut> v;
                               for (uint32_t i = 0; i < s->analysis->threads().size(); ++i) v.push_back({s, i});
                               return v;
                             })
      .def_property_readonly("tree", [](const SessionPtr& s) { return NodeOut{s, false, 0}; },
                             "The root of the merged call tree (call_tree=True).")
      .def_property_readonly("bottom_up_tree", [](const SessionPtr& s) { return NodeOut{s, true, 0}; },
                             "The root of the reversed tree (bottom_up=True).")
      .def_property_readonly("tree_size", [](const Session& s) { return s.analysis->tree().size(); })
      .def_property_readonly("warnings", [](const Session& s) {
        py::list out;
        for (const std::string& w : s.analysis->warnings()) out.append(name_text(w));
        return out;
      })
      .def_property_readonly("findings", [](const Session& s) { return findings_list(s); },
                             "Releases the program got wrong, grouped: dicts with kind (mismatched_delete, "
                             "mismatched_free), allocated, allocated_bytes, deleted and deleted_bytes or "
                             "allocated_with and released_with, count, stack, allocation_stack.")
      .def_property_readonly("has_call_paths", [](const Session& s) { return s.analysis->has_call_paths(); },
                             "True when the runtime recorded calling contexts.")
      .def("code_addresses",
           [](const Session& s) {
             std::vector<uint64_t> functions, call_sites;
             s.analysis->code_addresses(&functions, &call_sites);
             return py::make_tuple(functions, call_sites);
           },
           "(function entries, return addresses): the code addresses the profile holds, sorted.")
      .def("type_path_ids",
           [](const Session& s) {
             std::vector<uint32_t> ids;
             const MergedTree& tree = s.analysis->tree();
             for (uint32_t id = 1; id < tree.size(); ++id)
               if (tree.node(id).kind == MergedTree::kType) ids.push_back(id);
             return ids;
           },
           "The tree node numbers of type_paths(), in the same order.")
      .def("type_paths", &type_paths, py::arg("live_only") = false,
           "The merged tree's leaves: (frames root first, TypeGroup, Figures) for each call path and type "
           "(live_only: those with blocks live at the end).")
      .def("untyped_callers",
           [](const SessionPtr& s) {
             py::list out;
             for (const auto& caller : s->analysis->untyped_callers())
               out.append(py::make_tuple(name_text(caller.first), out_figures(*s, caller.second)));
             return out;
           },
           "(function, Figures) of the blocks of no type by the function that called the allocator, most bytes "
           "first (peaks not summed: 0).")
      .def("live_type_paths", &live_type_paths,
           "type_paths(live_only=True) of a pass without a call tree: (frames, TypeGroup, Figures) of each call "
           "path and type that holds blocks live at the end, of which only live_blocks and live_bytes are set.")
      .def("tree_json",
           [](const Session& s, bool bottom_up, const std::string& sort, uint32_t top) {
             std::string out;
             {
               py::gil_scoped_release release;
               if (!core::tree_json(*s.analysis, bottom_up, sort, top, &out)) out.clear();
             }
             if (out.empty()) throw py::value_error("unknown sort key " + sort);
             return py::str(out);
           },
           py::arg("bottom_up") = false, py::arg("sort") = "bytes", py::arg("top") = 0,
           "The merged call tree as a JSON list of nested nodes (no recursion, any depth).")
      .def("folded",
           [](const Session& s, const std::string& value) {
             std::string out;
             bool ok;
             {
               py::gil_scoped_release release;
               ok = core::folded(*s.analysis, value, &out);
             }
             if (!ok) throw py::value_error("unknown value " + value);
             return py::bytes(out);
           },
           py::arg("value") = "bytes", "flamegraph.pl's folded stacks, the type as the leaf frame.")
      .def("pprof_text",
           [](const Session& s) {
             py::gil_scoped_release release;
             std::string out = core::pprof_text(*s.analysis, s.file->modules());
             py::gil_scoped_acquire acquire;
             return py::bytes(out);
           },
           "gperftools' heap profile text (google-pprof PROGRAM FILE reads it).")
      .def("pprof_proto",
           [](const Session& s, const std::vector<MappingTuple>& mappings, const std::string& comment) {
             core::PprofInfo info = pprof_info(s, mappings, comment);
             std::string out;
             {
               py::gil_scoped_release release;
               out = core::pprof_proto(*s.analysis, info);
             }
             return py::bytes(out);
           },
           py::arg("mappings"), py::arg("comment") = "",
           "pprof's profile.proto, uncompressed. mappings: (start, limit, offset, path, build_id), main binary first.");
  m.def("pprof_proto_merged",
        [](const std::vector<std::tuple<SessionPtr, std::vector<MappingTuple>, std::string>>& processes,
           const std::string& comment) {
          std::vector<core::PprofProcess> parts;
          for (const auto& p : processes) {
            const Session& s = *std::get<0>(p);
            core::PprofInfo info = pprof_info(s, std::get<1>(p), "");
            parts.push_back(core::PprofProcess{s.analysis.get(), std::move(info), std::get<2>(p)});
          }
          std::string out;
          {
            py::gil_scoped_release release;
            out = core::pprof_proto_merged(parts, comment);
          }
          return py::bytes(out);
        },
        py::arg("processes"), py::arg("comment") = "",
        "One pprof profile.proto (uncompressed) of several processes of one program: processes is a list of "
        "(Analysis, its mappings as for Analysis.pprof_proto, the process's name for label `process`).");
}

}  // namespace bindings
}  // namespace heaptype

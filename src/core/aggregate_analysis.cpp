// aggregate_analysis.cpp: an aggregated profile's counts (format::AggregateCounts) applied
// to the groups in place of its events.
//
// Per (thread, site) the profile holds allocations, temporaries, blocks live at the end
// and blocks live at the heap's peak; per type tag its own peak. So every group gets
// exact allocations, objects, bytes, temporaries and live (leaked) figures. Peaks: the
// whole heap's is exact; a typed group's is its own (its tag's peak); every other group (untyped and inferred rows, threads,
// functions, call paths, a filtered selection) shows what it had live at the heap's
// peak (TypeGroup::peak_at_heap_peak), which is the peak snapshot: no more than its own.
#include "analysis.hpp"

namespace heaptype {
namespace core {

namespace {

size_t size_bucket(uint64_t size) {
  size_t bucket = size <= 1 ? 0 : static_cast<size_t>(64 - __builtin_clzll(size - 1));
  return bucket < kSizeBuckets ? bucket : kSizeBuckets - 1;
}

}  // namespace

void Analysis::apply_site_counts(Placement& p, const format::SiteCounts& c, uint64_t peak_time) {
  if (options_.stop_after_events) {  // the moment of the peak: only what was live is known
    format::SiteCounts at_peak;
    at_peak.live = at_peak.live_at_peak = c.live_at_peak;
    return apply_live_counts(p, at_peak, peak_time);
  }
  apply_live_counts(p, c, peak_time);
}

void Analysis::apply_live_counts(Placement& p, const format::SiteCounts& c, uint64_t peak_time) {
  Figures counts;
  counts.allocations = c.allocations;
  counts.objects = c.allocations * p.objects;
  counts.bytes = c.allocations * p.size;
  counts.live_bytes = static_cast<int64_t>(c.live * p.size);
  counts.live_blocks = static_cast<int64_t>(c.live);
  counts.temporary_allocations = c.temporaries;
  counts.peak_bytes = c.live_at_peak * p.size;
  counts.peak_time = peak_time;
  if (p.selected && options_.histograms) histograms_[p.type_group].sizes[size_bucket(p.size)] += c.allocations;
  add_aggregated(p, counts);
  totals_.add_aggregated(counts);
  totals_.frees += c.allocations - c.live;
}

// Groups of one type tag get that tag's own peak. A name that several tags share, the
// untyped and inferred rows, and a pass with a filter on threads, sizes or functions
// (its groups' own peaks count only what it keeps) keep the snapshot.
void Analysis::apply_type_peaks() {
  bool filtered = !options_.threads.empty() || options_.min_size > 0 || options_.max_size != UINT64_MAX ||
                  !options_.functions_on_path.empty();
  if (filtered) return;
  std::vector<uint32_t> tags(types_.size(), 0);  // tags counted in each group
  std::vector<const format::TypePeak*> peak_of(types_.size(), nullptr);
  for (const format::TypePeak& type : file_.aggregate().types) {
    auto it = group_of_tag_.find(type.tag);
    if (it == group_of_tag_.end()) continue;  // no block of it is counted
    ++tags[it->second];
    peak_of[it->second] = &type;
  }
  for (size_t g = 0; g < types_.size(); ++g) {
    if (tags[g] != 1) continue;
    types_[g].figures.peak_bytes = peak_of[g]->peak_bytes;
    types_[g].figures.peak_time = peak_of[g]->peak_time;
    types_[g].peak_at_heap_peak = false;
  }
}

// Each counted site makes a context, most a type of their own (a test binary's profile:
// a thousand of each): the tables are made that large at once rather than rehashed
// a dozen times on the way.
void Analysis::reserve_for_counted_sites(const format::AggregateCounts& counts) {
  size_t counted = counts.sites.size();
  context_index_.reserve(contexts_.size() + counted);
  group_of_tag_.reserve(group_of_tag_.size() + counted);
  group_of_name_.reserve(group_of_name_.size() + counted);
  strings_.reserve(strings_.size() + counted);
}

void Analysis::apply_aggregate() {
  const format::AggregateCounts& counts = file_.aggregate();
  if (!counts.present) {
    warnings_.push_back(file_.path() +
                        " is an aggregated profile without a whole set of counts (the program did not reach "
                        "its end or a snapshot): only its definitions are here");
    return;
  }
  reserve_for_counted_sites(counts);
  uint64_t undefined = 0;
  for (const format::CountedSite& counted : counts.sites) {
    const format::SiteCounts& c = counted.counts;
    if (!c.allocations && !c.live) continue;
    Placement* p = placement(counted.thread, counted.site);
    if (!p) {
      undefined += c.allocations;
      continue;
    }
    apply_site_counts(*p, c, counts.peak_time);
  }
  if (undefined)
    warnings_.push_back(std::to_string(undefined) + " allocations are counted at sites the profile does not define; "
                        "they are left out");
  totals_.peak_bytes = counts.peak_bytes;
  totals_.peak_time = counts.peak_time;
  totals_.peak_live_blocks = counts.peak_blocks;
  totals_.duration = options_.stop_after_events ? counts.peak_time : counts.time;
  for (TypeGroup& g : types_) g.peak_at_heap_peak = true;
  if (!options_.stop_after_events) apply_type_peaks();
}

}  // namespace core
}  // namespace heaptype

// HeapType's HTML report: draws the data embedded in the page (see html/data.py and
// html/diff.py) with d3. Every name from the profile enters the document as text
// (textContent, setAttribute), never as markup.
//
// The figures are the core's. Under a brushed time range the page composes the
// figures of the buckets the range covers (ranges.py): counts and bytes add up, a
// peak is the largest of the buckets' peaks, live figures are the last bucket's.
(function () {
  "use strict";

  const DATA = JSON.parse(document.getElementById("heaptype-data").textContent);
  const state = {range: null, type: null, metric: "bytes", tab: null, zoom: -1, by: "type"};
  const listeners = [];

  // --- numbers as the CLI prints them (present/units.py) -------------------------------------

  function formatBytes(n) {
    if (Math.abs(n) < 1024) return n + " B";
    let value = Math.abs(n);
    const sign = n < 0 ? "-" : "";
    for (const unit of ["KiB", "MiB", "GiB", "TiB"]) {
      value /= 1024;
      if (value < 1024 || unit === "TiB") {
        return sign + (value < 100 ? String(Number(value.toPrecision(3))) : String(Math.round(value))) + " " + unit;
      }
    }
    return sign + n + " B";
  }
  const formatCount = (n) => Number(n).toLocaleString("en-US");
  const exactBytes = (n) => formatCount(n) + " B";
  const signed = (n, format) => (n > 0 ? "+" : n < 0 ? "-" : "") + format(Math.abs(n));
  function formatSeconds(s) {
    return (Math.abs(s) < 0.01 && s !== 0 ? s.toFixed(6) : s.toFixed(3)) + " s";
  }
  // Axis labels: milliseconds when the axis spans less than a tenth of a second.
  const axisTime = (span) => (t) => (t < 0 ? "" : span < 0.1 ? +(t * 1000).toFixed(3) + " ms" : +t.toFixed(3) + " s");

  // --- the DOM, with text only ---------------------------------------------------------

  function el(tag, attributes, children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attributes || {})) {
      if (key === "text") node.textContent = value;
      else if (key === "className") node.className = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (value !== undefined && value !== null && value !== false) node.setAttribute(key, value);
    }
    for (const child of children || []) if (child) node.appendChild(child);
    return node;
  }

  const tooltip = document.getElementById("tooltip");
  function showTooltip(lines, x, y) {
    tooltip.textContent = "";
    for (const [label, value] of lines) {
      tooltip.appendChild(el("div", {className: "tip-line"}, [
        el("span", {className: "tip-label", text: label}),
        el("span", {className: "tip-value", text: value === undefined ? "" : value}),
      ]));
    }
    tooltip.hidden = false;
    const width = tooltip.offsetWidth, height = tooltip.offsetHeight;
    const left = Math.min(x + 14, window.scrollX + document.documentElement.clientWidth - width - 8);
    tooltip.style.left = Math.max(window.scrollX + 4, left) + "px";
    tooltip.style.top = (y + 14 + height > window.scrollY + window.innerHeight ? y - height - 10 : y + 14) + "px";
  }
  const hideTooltip = () => { tooltip.hidden = true; };

  function setState(change) {
    Object.assign(state, change);
    for (const listener of listeners) listener();
  }

  // --- colours: the timeline's series first, then any type by its name --------------

  const palette = d3.schemeTableau10.concat(d3.schemeSet3);
  const typeColours = new Map();
  function typeColour(name) {
    if (name === "other") return "#bbbbbb";
    if (!typeColours.has(name)) {
      let hash = 0;
      for (let i = 0; i < name.length; i++) hash = (hash * 31 + name.charCodeAt(i)) | 0;
      typeColours.set(name, palette[Math.abs(hash) % palette.length]);
    }
    return typeColours.get(name);
  }
  // The type timeline's series keep the palette's first colours, in their order.
  for (const [i, series] of ((DATA.timelines && DATA.timelines.type.series) || []).entries()) {
    if (series.name !== "other") typeColours.set(series.name, palette[i % palette.length]);
  }
  function frameColour(name) {
    let hash = 0;
    for (let i = 0; i < name.length; i++) hash = (hash * 17 + name.charCodeAt(i)) | 0;
    const t = (Math.abs(hash) % 1000) / 1000;
    return d3.hsl(20 + 35 * t, 0.75, 0.62 + 0.1 * t).toString();
  }

  // --- figures over a time range ---------------------------------------------------------

  const PEAKS = new Set(["peak_bytes"]);
  const AT_END = new Set(["live_bytes", "live_blocks"]);
  function compose(series, name) {
    const values = series[name];
    const [first, last] = state.range;
    if (AT_END.has(name)) return values[last - 1];
    let out = 0;
    for (let k = first; k < last; k++) out = PEAKS.has(name) ? Math.max(out, values[k]) : out + values[k];
    return out;
  }
  function composeAll(series) {
    const out = {};
    for (const name of Object.keys(series)) out[name] = compose(series, name);
    return out;
  }
  const ranges = DATA.ranges;
  const rangeStart = () => ranges.edges_s[state.range[0]];
  const rangeEnd = () => ranges.edges_s[state.range[1]];

  // --- tables: sortable, searchable ------------------------------------------------------

  const PAGE_ROWS = 200;
  function makeTable(options) {
    const table = {sort: options.sort, descending: true, query: "", limit: PAGE_ROWS};
    const search = el("input", {type: "search", placeholder: "search " + options.searchLabel,
                                "aria-label": "search " + options.searchLabel});
    const note = el("p", {className: "note"});
    const element = el("table", {id: options.id, className: "figures"});
    const more = el("button", {type: "button", className: "more", hidden: true});
    const wrapper = el("div", {className: "table-view"}, [search, note, element, more]);
    search.addEventListener("input", () => { table.query = search.value.toLowerCase(); table.limit = PAGE_ROWS; render(); });
    more.addEventListener("click", () => { table.limit = Infinity; render(); });

    function render() {
      const columns = options.columns();
      let rows = options.rows();
      if (table.query) rows = rows.filter((r) => options.name(r).toLowerCase().includes(table.query));
      const column = columns.find((c) => c.key === table.sort) || columns[0];
      const sign = table.descending ? -1 : 1;
      rows = rows.slice().sort((a, b) => {
        const x = column.value(a), y = column.value(b);
        if (x === y) return options.name(a) < options.name(b) ? -1 : 1;
        if (x === null || x === undefined) return 1;
        if (y === null || y === undefined) return -1;
        return (x < y ? -1 : 1) * sign;
      });
      note.textContent = options.note ? options.note() : "";
      element.textContent = "";
      const head = el("tr");
      for (const c of columns) {
        const arrow = c.key === table.sort ? (table.descending ? " \u25be" : " \u25b4") : "";
        head.appendChild(el("th", {className: c.numeric ? "num" : "", text: c.label + arrow, title: c.title,
                                   "data-key": c.key, onclick: () => {
          table.descending = c.key === table.sort ? !table.descending : !!c.numeric;
          table.sort = c.key;
          render();
        }}));
      }
      const body = el("tbody");
      for (const row of rows.slice(0, table.limit)) {
        const tr = el("tr", {"data-name": options.name(row)});
        if (options.onRowClick) tr.addEventListener("click", () => options.onRowClick(row));
        if (options.selected && options.selected(row)) tr.className = "selected";
        for (const c of columns) {
          const value = c.value(row);
          tr.appendChild(el("td", {className: c.numeric ? "num" : "name",
                                   text: value === null || value === undefined ? "\u2014" : (c.format ? c.format(value, row) : value)}));
        }
        body.appendChild(tr);
      }
      element.appendChild(el("thead", {}, [head]));
      element.appendChild(body);
      more.hidden = rows.length <= table.limit;
      more.textContent = "show all " + formatCount(rows.length) + " rows";
    }
    return {element: wrapper, render};
  }

  function numberColumn(key, label, value, format, title) {
    return {key, label, numeric: true, value, format: format || formatCount, title};
  }

  // --- the timeline ------------------------------------------------------------------------

  function chartSize(container, height) {
    const width = Math.max(600, container.clientWidth || 900);
    return {width, height, margin: {top: 12, right: 20, bottom: 28, left: 78}};
  }

  function timeDomain(times) {
    const first = times[0], last = times[times.length - 1];
    return first === last ? [first - 0.001, last + 0.001] : [first, last];
  }

  function axes(svg, size, x, y) {
    const {width, height, margin} = size;
    svg.append("g").attr("class", "axis").attr("transform", `translate(0,${height - margin.bottom})`)
      .call(d3.axisBottom(x).ticks(Math.max(2, Math.floor(width / 110)))
        .tickFormat(axisTime(x.domain()[1] - x.domain()[0])));
    svg.append("g").attr("class", "axis").attr("transform", `translate(${margin.left},0)`)
      .call(d3.axisLeft(y).ticks(5).tickFormat((v) => formatBytes(v)));
  }

  // The groupings a timeline stacks by, as `heaptype timeline --by` names them; the
  // core made each one (data.py), the page only draws the chosen one.
  const GROUPING_LABELS = {type: "type", function: "function", callpath: "call path", thread: "thread"};
  // What the drawn timeline does when the state changes (replaced when it is redrawn).
  let timelineUpdates = [];
  let drawnBy = null;

  // Series of a grouping other than type: the palette in the series' order.
  function seriesColour(by, names) {
    if (by === "type") return typeColour;
    const colours = new Map(names.map((name, i) => [name, name === "other" ? "#bbbbbb" : palette[i % palette.length]]));
    return (name) => colours.get(name);
  }

  function drawGroupingChoice() {
    const holder = document.getElementById("timeline-by");
    for (const by of Object.keys(DATA.timelines)) {
      holder.appendChild(el("button", {type: "button", className: "grouping", id: "timeline-by-" + by,
                                       "data-by": by, text: GROUPING_LABELS[by] || by,
                                       onclick: () => setState({by})}));
    }
    listeners.push(() => {
      if (drawnBy !== state.by) drawTimeline();
      for (const button of holder.children) button.classList.toggle("selected", button.dataset.by === state.by);
      for (const update of timelineUpdates) update();
    });
  }

  function drawTimeline() {
    const by = state.by;
    const timeline = DATA.timelines[by];
    const byType = by === "type";
    const container = document.getElementById("timeline");
    const legend = document.getElementById("legend");
    const hint = document.getElementById("timeline-hint");
    container.textContent = "";
    legend.textContent = "";
    timelineUpdates = [];
    drawnBy = by;
    document.getElementById("timeline-title").textContent = "Live bytes over time, by " + GROUPING_LABELS[by];
    if (!timeline.times_s.length) {
      container.appendChild(el("p", {className: "note", text: timeline.note || "no allocations"}));
      return;
    }
    const size = chartSize(container, 280);
    const {width, height, margin} = size;
    const names = timeline.series.map((s) => s.name);
    const colour = seriesColour(by, names);
    const rows = timeline.times_s.map((t, i) => {
      const row = {time: t};
      timeline.series.forEach((s, k) => { row[k] = s.bytes[i]; });
      return row;
    });
    const stacked = d3.stack().keys(names.map((_, k) => k))(rows);
    const x = d3.scaleLinear().domain(timeDomain(timeline.times_s)).range([margin.left, width - margin.right]);
    const y = d3.scaleLinear().domain([0, Math.max(1, timeline.peak_bytes) * 1.08]).nice()
      .range([height - margin.bottom, margin.top]);
    // The scale's ends, for whoever needs to point at a time (the tests do).
    const svg = d3.select(container).append("svg").attr("width", width).attr("height", height)
      .attr("role", "img").attr("aria-label", "live bytes over time, stacked by " + GROUPING_LABELS[by])
      .attr("data-by", by).attr("data-t0", x.domain()[0]).attr("data-t1", x.domain()[1])
      .attr("data-px0", x.range()[0]).attr("data-px1", x.range()[1]);
    const single = rows.length === 1;
    const area = d3.area().x((d) => x(d.data.time)).y0((d) => y(d[0])).y1((d) => y(d[1])).curve(d3.curveStepAfter);
    const bandWidth = 6;
    const bands = svg.append("g").attr("class", "bands").selectAll("path").data(stacked).enter().append("path")
      .attr("class", "series").attr("data-series", (d) => names[d.key]).attr("fill", (d) => colour(names[d.key]))
      .attr("d", (d) => single
        ? `M${x(rows[0].time) - bandWidth},${y(d[0][0])}H${x(rows[0].time) + bandWidth}V${y(d[0][1])}H${x(rows[0].time) - bandWidth}Z`
        : area(d.concat([Object.assign([d[d.length - 1][0], d[d.length - 1][1]], {data: {time: x.domain()[1]}})])));
    axes(svg, size, x, y);

    // The exact peak: marked, and the hover snaps to it.
    const peakX = x(timeline.peak_time_s);
    svg.append("line").attr("class", "peak-marker").attr("x1", peakX).attr("x2", peakX)
      .attr("y1", margin.top).attr("y2", height - margin.bottom);
    svg.append("text").attr("class", "peak-label").attr("x", Math.min(peakX + 4, width - margin.right - 120))
      .attr("y", margin.top + 10).text("peak " + formatBytes(timeline.peak_bytes) + " at " + formatSeconds(timeline.peak_time_s));
    const guide = svg.append("line").attr("class", "guide").attr("y1", margin.top).attr("y2", height - margin.bottom)
      .style("display", "none");

    const nearest = (time) => {
      const i = d3.bisector((r) => r.time).left(rows, time);
      if (i <= 0) return 0;
      if (i >= rows.length) return rows.length - 1;
      return time - rows[i - 1].time <= rows[i].time - time ? i - 1 : i;
    };
    // Under the mouse, a pixel column can hold many points: the highest of them, as
    // drawn (so the peak is what the hover shows at the peak marker).
    const atPixel = (mx) => {
      const lo = d3.bisector((r) => r.time).left(rows, x.invert(mx - 1));
      const hi = d3.bisector((r) => r.time).right(rows, x.invert(mx + 1));
      let best = -1;
      for (let k = lo; k < hi; ++k) if (best < 0 || timeline.totals[k] > timeline.totals[best]) best = k;
      return best >= 0 ? best : nearest(x.invert(mx));
    };
    function hover() {
      const [mx] = d3.mouse(this);
      const i = atPixel(mx);
      guide.attr("x1", x(rows[i].time)).attr("x2", x(rows[i].time)).style("display", null);
      const lines = [["time", formatSeconds(rows[i].time)], ["total live", exactBytes(timeline.totals[i])]];
      const present = timeline.series.map((s) => [s.name, s.bytes[i]]).filter(([, v]) => v > 0)
        .sort((a, b) => b[1] - a[1]);
      for (const [name, value] of present) lines.push([name, exactBytes(value)]);
      // Several points may share the peak's time (events within one clock tick): the
      // point under the mouse is the peak when its time and its total are the peak's.
      if (rows[i].time === timeline.peak_time_s && timeline.totals[i] === timeline.peak_bytes) {
        lines.push(["", "the peak"]);
      }
      showTooltip(lines, d3.event.pageX, d3.event.pageY);
    }
    const seriesAt = (mx, my) => {
      const i = atPixel(mx);
      const value = y.invert(my);
      const band = stacked.find((s) => s[i][0] <= value && value < s[i][1]);
      return band ? names[band.key] : null;
    };

    const brushArea = svg.append("g").attr("class", "brush");
    if (ranges) {
      const edges = ranges.edges_s;
      const snap = ([t0, t1]) => {
        let first = Math.max(0, d3.bisectRight(edges, t0) - 1);
        let last = Math.min(edges.length - 1, Math.max(first + 1, d3.bisectLeft(edges, t1)));
        if (first >= edges.length - 1) first = edges.length - 2;
        return [first, last];
      };
      // Moving the brush from code (snapping, clearing) emits brush events too: ignored.
      const rangePixels = (range) => [x(edges[range[0]]), x(edges[range[1]])].map(
        (px) => Math.max(margin.left, Math.min(width - margin.right, px)));
      let moving = false;
      const moveBrush = (selection) => {
        moving = true;
        brushArea.call(brush.move, selection);
        moving = false;
      };
      const brush = d3.brushX().extent([[margin.left, margin.top], [width - margin.right, height - margin.bottom]])
        .on("end", function () {
          if (moving || !d3.event.sourceEvent) return;
          const selection = d3.event.selection;
          if (!selection) {
            const [mx, my] = d3.mouse(this);
            const name = byType ? seriesAt(mx, my) : null;
            if (name && name !== "other") setState({type: state.type === name ? null : name});
            else if (state.range) setState({range: null});
            return;
          }
          const range = snap(selection.map((px) => x.invert(px)));
          moveBrush(rangePixels(range));
          setState({range});
        });
      brushArea.call(brush);
      if (state.range) moveBrush(rangePixels(state.range));  // redrawn for another grouping: keep the range
      timelineUpdates.push(() => { if (!state.range && d3.brushSelection(brushArea.node())) moveBrush(null); });
      hint.textContent = "Drag across the chart to choose a time range (it snaps to " + (edges.length - 1) +
        " equal spans of the run); " + (byType ? "click a band or a name to show one type; " : "") +
        "hover for exact figures.";
    } else {
      brushArea.append("rect").attr("class", "overlay").attr("x", margin.left).attr("y", margin.top)
        .attr("width", width - margin.left - margin.right).attr("height", height - margin.top - margin.bottom)
        .attr("fill", "transparent").on("click", function () {
          const [mx, my] = d3.mouse(this);
          const name = byType ? seriesAt(mx, my) : null;
          if (name && name !== "other") setState({type: state.type === name ? null : name});
        });
      hint.textContent = (DATA.ranges_requested ? "The run is shorter than two clock ticks: it cannot be cut into " +
        "time ranges. " : "This page was written without time ranges (--ranges 0). ") +
        (byType ? "Click a band or a name to show one type." : "");
    }
    brushArea.on("mousemove.tip", hover).on("mouseleave.tip", () => { guide.style("display", "none"); hideTooltip(); });

    const groups = GROUPING_LABELS[by] + "s";  // the legend's "other": groups outside the top N
    for (const name of names) {
      const item = el("button", {type: "button", className: "legend-item", "data-series": name,
                                 title: name === "other" ? groups + " outside the top " + (names.length - 1)
                                   : byType ? "show only " + name : name},
                      [el("span", {className: "swatch"}), el("span", {className: "legend-name", text: name})]);
      item.firstChild.style.background = colour(name);
      if (byType && name !== "other") item.addEventListener("click", () => setState({type: state.type === name ? null : name}));
      legend.appendChild(item);
    }
    if (!byType) return;
    timelineUpdates.push(() => {
      bands.classed("dimmed", (d) => state.type !== null && names[d.key] !== state.type);
      for (const item of legend.children) item.classList.toggle("selected", item.dataset.series === state.type);
    });
  }

  // --- the selection line above the views ---------------------------------------------

  function drawSelection() {
    const label = document.getElementById("selection");
    const clear = document.getElementById("clear-selection");
    clear.addEventListener("click", () => setState({range: null, type: null}));
    listeners.push(() => {
      const parts = [];
      if (state.range) parts.push(formatSeconds(rangeStart()) + " to " + formatSeconds(rangeEnd()));
      if (state.type !== null) parts.push("type " + state.type);
      label.textContent = parts.length ? "showing " + parts.join(", ") : "";
      clear.hidden = !parts.length;
    });
  }

  // --- tabs ------------------------------------------------------------------------------

  function drawTabs(views) {
    const nav = document.getElementById("tabs");
    const holder = document.getElementById("views");
    for (const view of views) {
      const button = el("button", {type: "button", className: "tab", "data-tab": view.id, text: view.label,
                                   onclick: () => setState({tab: view.id})});
      if (view.count) button.appendChild(el("span", {className: "tab-count", text: " (" + formatCount(view.count) + ")"}));
      nav.appendChild(button);
      view.panel = el("div", {className: "panel", id: "panel-" + view.id, hidden: true}, [view.element]);
      holder.appendChild(view.panel);
    }
    state.tab = views[0].id;
    listeners.push(() => {
      for (const view of views) {
        const shown = view.id === state.tab;
        view.panel.hidden = !shown;
        nav.querySelector(`[data-tab="${view.id}"]`).classList.toggle("selected", shown);
        if (shown) view.render();
      }
    });
  }

  // --- the flame graph (an icicle: callers above callees, types at the bottom) -------------

  const METRICS = [["bytes", "bytes"], ["peak_bytes", "peak"], ["allocations", "allocations"],
                   ["temporary_allocations", "temporaries"]];
  const metricFormat = (metric) => (metric === "bytes" || metric === "peak_bytes" ? formatBytes : formatCount);
  const metricExact = (metric) => (metric === "bytes" || metric === "peak_bytes" ? exactBytes : formatCount);

  function treeShape(flame) {
    const count = flame.parent.length;
    const children = Array.from({length: count}, () => []);
    const roots = [];
    flame.parent.forEach((p, i) => (p < 0 ? roots : children[p]).push(i));
    const nameOf = (i) => flame.names[flame.name[i]];
    return {count, children, roots, nameOf};
  }

  // Lays the tree out from `top` (-1: everything) in [0, 1]: a node's children share
  // its width in proportion to their values; when they add up to more than the node
  // (peaks reached at different moments) they are scaled down to fit.
  function layout(shape, value, top, rootValue) {
    const boxes = [];
    const start = top < 0 ? shape.roots : [top];
    const startTotal = top < 0 ? Math.max(rootValue, d3.sum(start, value)) : value(top);
    const stack = [];
    let x = 0;
    for (const i of start.slice().sort((a, b) => value(b) - value(a))) {
      const w = startTotal > 0 ? value(i) / startTotal : 0;
      stack.push([i, x, w, 0]);
      x += w;
    }
    while (stack.length) {
      const [i, x0, w, depth] = stack.pop();
      if (w <= 0) continue;
      boxes.push({i, x0, w, depth});
      const kids = shape.children[i].filter((c) => value(c) > 0).sort((a, b) => value(b) - value(a));
      const total = Math.max(value(i), d3.sum(kids, value));
      let cx = x0;
      for (const c of kids) {
        const cw = total > 0 ? w * value(c) / total : 0;
        stack.push([c, cx, cw, depth + 1]);
        cx += cw;
      }
    }
    return boxes;
  }

  function flameView(options) {
    const shape = treeShape(options.flame);
    const controls = el("div", {className: "flame-controls"});
    for (const [metric, label] of METRICS) {
      const id = "metric-" + metric;
      const input = el("input", {type: "radio", name: "flame-metric", id, value: metric,
                                 onchange: () => setState({metric, zoom: -1})});
      if (metric === state.metric) input.checked = true;
      controls.appendChild(el("label", {for: id}, [input, document.createTextNode(" " + label)]));
    }
    const reset = el("button", {type: "button", text: "reset zoom", hidden: true, onclick: () => setState({zoom: -1})});
    controls.appendChild(reset);
    const note = el("p", {className: "note"});
    const chart = el("div", {id: "flame"});
    const element = el("div", {className: "flame-view"}, [controls, note, chart]);
    const ROW = 18;

    function render() {
      const value = options.value(shape);
      const boxes = layout(shape, value, state.zoom, options.rootValue(shape, value));
      const width = Math.max(600, chart.clientWidth || element.clientWidth || 900);
      const visible = boxes.filter((b) => b.w * width >= 0.5);
      const depth = d3.max(visible, (b) => b.depth) || 0;
      const ancestors = [];
      for (let p = state.zoom; p >= 0; p = options.flame.parent[p]) ancestors.unshift(p);
      ancestors.pop();
      const top = ancestors.length;
      chart.textContent = "";
      reset.hidden = state.zoom < 0;
      note.textContent = options.note(shape);
      if (!visible.length) {
        chart.appendChild(el("p", {className: "note", text: "nothing allocated here"}));
        return;
      }
      const svg = d3.select(chart).append("svg").attr("width", width).attr("height", (top + depth + 1) * ROW + 2);
      const items = ancestors.map((i, d) => ({i, x0: 0, w: 1, depth: d, ancestor: true}))
        .concat(visible.map((b) => Object.assign({}, b, {depth: b.depth + top})));
      const frames = svg.selectAll("g.frame").data(items).enter().append("g")
        .attr("class", (b) => "frame" + (options.flame.kind[b.i] ? " type" : "") + (b.ancestor ? " ancestor" : ""))
        .attr("data-name", (b) => shape.nameOf(b.i))
        .attr("transform", (b) => `translate(${b.x0 * width},${b.depth * ROW})`);
      frames.append("rect").attr("width", (b) => Math.max(0.5, b.w * width - 1)).attr("height", ROW - 1)
        .attr("fill", (b) => options.colour(shape, b.i));
      frames.append("text").attr("x", 4).attr("y", ROW - 5).text((b) => {
        const room = Math.floor((b.w * width - 8) / 6.5);
        const name = shape.nameOf(b.i) + (options.flame.inlined[b.i] ? " [inlined]" : "");
        return room < 3 ? "" : name.length <= room ? name : name.slice(0, room - 1) + "\u2026";
      });
      frames.on("mousemove", (b) => showTooltip(options.tooltip(shape, b.i, value), d3.event.pageX, d3.event.pageY))
        .on("mouseleave", hideTooltip)
        .on("click", (b) => setState({zoom: b.ancestor || b.i === state.zoom ? options.flame.parent[b.i] : b.i}));
    }
    return {element, render};
  }

  function pathOf(flame, shape, i) {
    const names = [];
    for (let p = i; p >= 0; p = flame.parent[p]) names.unshift(shape.nameOf(p));
    return names;
  }

  // The report's flame graph: the kept tree's figures, for the chosen metric, range and type.
  function reportFlame() {
    const flame = DATA.flame;
    const figure = (i, metric) => state.range ? compose(ranges.nodes[i], metric) : flame.figures[metric][i];
    function value(shape) {
      const metric = state.metric;
      if (state.type === null) return (i) => figure(i, metric);
      // One type: its leaves, and above them the sums of what they hold (a peak
      // summed over paths is at most that: the paths may peak at different moments).
      const values = new Float64Array(shape.count);
      for (let i = shape.count - 1; i >= 0; i--) {
        if (flame.kind[i] === 1) values[i] = shape.nameOf(i) === state.type ? figure(i, metric) : 0;
        const p = flame.parent[i];
        if (p >= 0) values[p] += values[i];
      }
      return (i) => values[i];
    }
    // The whole: what the filters selected, over the range (the tree may leave paths out).
    function rootValue(shape, value) {
      if (state.type !== null) return d3.sum(shape.roots, value);
      return state.range ? compose(ranges.selected, state.metric) : DATA.selected[state.metric];
    }
    function tooltip(shape, i, value) {
      const lines = [[flame.kind[i] ? "type" : "function", shape.nameOf(i)]];
      if (flame.inlined[i]) lines.push(["", "inlined at its call site"]);
      const labels = {bytes: "bytes", peak_bytes: "peak", allocations: "allocations", temporary_allocations: "temporaries"};
      if (state.type !== null && !flame.kind[i]) {
        lines.push([labels[state.metric] + " of " + state.type + (state.metric === "peak_bytes" ? " (at most)" : ""),
                    metricExact(state.metric)(value(i))]);
      } else {
        for (const metric of ["bytes", "peak_bytes", "allocations", "temporary_allocations"]) {
          lines.push([labels[metric], metricExact(metric)(figure(i, metric))]);
        }
      }
      if (!state.range && !flame.kind[i]) lines.push(["live at exit", exactBytes(flame.figures.live_bytes[i])]);
      lines.push(["", "click to zoom"]);
      return lines;
    }
    const colour = (shape, i) => (flame.kind[i] ? typeColour(shape.nameOf(i)) : frameColour(shape.nameOf(i)));
    const note = () => {
      const parts = ["Call paths from the threads' first functions (top) to the types they allocated (bottom); width: " +
        METRICS.find(([m]) => m === state.metric)[1] + "."];
      if (state.metric === "peak_bytes") parts.push("Peaks do not add up: children that peaked at different moments are scaled to fit their caller.");
      if (flame.cut) parts.push(formatCount(flame.cut) + " smaller call-tree nodes are left out of this page.");
      if (!DATA.head.has_call_paths) parts.push("No calling contexts were recorded: paths start at the allocating function.");
      return parts.join(" ");
    };
    return flameView({flame, value, rootValue, tooltip, colour, note});
  }

  // --- the report's tables -----------------------------------------------------------------

  function liveLabel() {
    return state.range ? "live at " + formatSeconds(rangeEnd()) : "live at exit";
  }

  function typesTable() {
    const rows = () => {
      const out = [];
      DATA.types.rows.forEach((row, i) => {
        if (state.type !== null && row.label !== state.type) return;
        const figures = state.range ? composeAll(ranges.types[i]) : row;
        if (state.range && !figures.allocations && !figures.peak_bytes) return;
        out.push(Object.assign({label: row.label}, figures));
      });
      return out;
    };
    return makeTable({
      id: "types-table", searchLabel: "types", sort: "peak_bytes", rows, name: (r) => r.label,
      onRowClick: (r) => setState({type: state.type === r.label ? null : r.label}),
      selected: (r) => r.label === state.type,
      columns: () => [
        {key: "label", label: "type", value: (r) => r.label},
        numberColumn("allocations", "allocations", (r) => r.allocations),
        numberColumn("objects", "objects", (r) => r.objects),
        numberColumn("bytes", "bytes", (r) => r.bytes, formatBytes),
        numberColumn("peak_bytes", "peak", (r) => r.peak_bytes, formatBytes, "the most bytes of the type live at one moment"),
        numberColumn("live_bytes", liveLabel(), (r) => r.live_bytes, formatBytes),
        numberColumn("temporary_allocations", "temporaries", (r) => r.temporary_allocations),
      ],
      note: () => (state.range ? "Allocated between " + formatSeconds(rangeStart()) + " and " + formatSeconds(rangeEnd()) +
        "; peaks reached then; live figures at its end." : "The whole run, as `heaptype report` prints it.") +
        (DATA.types.rows_cut ? " " + formatCount(DATA.types.rows_cut) + " smaller types are left out of this page." : ""),
    });
  }

  function functionsTable() {
    const labels = new Map(DATA.types.rows.map((r) => [JSON.stringify([r.type, r.inferred]), r.label]));
    const labelOf = (entry) => labels.get(JSON.stringify([entry.type, entry.inferred])) ||
      (entry.type === null ? "(untyped)" : entry.type);
    const rows = () => {
      const out = [];
      DATA.functions.functions.forEach((f, i) => {
        if (state.type !== null) {
          const entry = f.types.find((t) => labelOf(t) === state.type);
          if (entry) out.push({function: f.function, self: entry, total: null});
          return;
        }
        const self = state.range ? composeAll(ranges.functions[i].self) : f.self;
        const total = state.range ? composeAll(ranges.functions[i].total) : f.total;
        if (state.range && !total.allocations && !total.peak_bytes) return;
        out.push({function: f.function, self, total});
      });
      return out;
    };
    const total = (key) => (r) => (r.total ? r.total[key] : null);
    const self = (key) => (r) => (r.self[key] === undefined ? null : r.self[key]);
    return makeTable({
      id: "functions-table", searchLabel: "functions", sort: "self_bytes", rows, name: (r) => r.function,
      columns: () => [
        {key: "function", label: "function", value: (r) => r.function},
        numberColumn("self_allocations", "self allocs", self("allocations")),
        numberColumn("self_bytes", "self bytes", self("bytes"), formatBytes),
        numberColumn("self_peak", "self peak", self("peak_bytes"), formatBytes),
        numberColumn("total_allocations", "total allocs", total("allocations")),
        numberColumn("total_bytes", "total bytes", total("bytes"), formatBytes),
        numberColumn("total_peak", "total peak", total("peak_bytes"), formatBytes),
        numberColumn("total_live", liveLabel(), total("live_bytes"), formatBytes),
      ],
      note: () => {
        if (state.type !== null) {
          return "What each function allocated of " + state.type + " itself, over the whole run (peaks per type and path " +
            "are in the flame graph)." + (state.range ? " The time range does not apply to this table while a type is chosen." : "");
        }
        return (state.range ? "Between " + formatSeconds(rangeStart()) + " and " + formatSeconds(rangeEnd()) + ". " : "") +
          "Self: allocated by the function itself; total: while it was on the stack (frames as `heaptype report " +
          "--by function --no-inlined`)." +
          (DATA.functions.rows_cut ? " " + formatCount(DATA.functions.rows_cut) + " more functions are left out of this page." : "");
      },
    });
  }

  function leaksTable() {
    const rows = () => DATA.leaks.leaks.filter((r) => state.type === null || r.label === state.type)
      .map((r) => Object.assign({path: r.stack.join(" \u2192 ")}, r));
    return makeTable({
      id: "leaks-table", searchLabel: "leaks", sort: "bytes", rows, name: (r) => r.label + " " + r.path,
      columns: () => [
        {key: "label", label: "type", value: (r) => r.label},
        numberColumn("blocks", "blocks", (r) => r.blocks),
        numberColumn("bytes", "bytes", (r) => r.bytes, exactBytes),
        {key: "path", label: "call stack", value: (r) => r.path},
      ],
      note: () => formatCount(DATA.leaks.leaked_blocks) + " blocks (" + exactBytes(DATA.leaks.leaked_bytes) +
        ") still live at exit, as `heaptype leaks` prints them; the time range does not apply.",
    });
  }

  // Releases the program got wrong, as the runtime recorded them (report/findings.py):
  // whole-run figures, as `heaptype report` lists them.
  function findingRows() {
    const path = (stack) => stack.join(" \u2192 ");
    const deletes = DATA.findings.mismatched_deletes.map((f) => ({
      kind: "mismatched delete", allocated: f.allocated, count: f.count, path: path(f.stack),
      allocation_path: path(f.allocation_stack),
      what: "deleted as " + f.deleted + " (" + exactBytes(f.deleted_bytes) + "), allocated as " + f.allocated +
        " (" + exactBytes(f.allocated_bytes) + ")"}));
    const frees = DATA.findings.mismatched_frees.map((f) => ({
      kind: "mismatched " + f.released_with, allocated: f.allocated, count: f.count, path: path(f.stack),
      allocation_path: path(f.allocation_stack),
      what: "allocated with " + f.allocated_with + " (" + exactBytes(f.allocated_bytes) + "), released with " +
        f.released_with}));
    return deletes.concat(frees);
  }

  function findingsTable() {
    const all = findingRows();
    const rows = () => all.filter((r) => state.type === null || r.allocated === state.type);
    const table = makeTable({
      id: "findings-table", searchLabel: "findings", sort: "count", rows, name: (r) => r.allocated + " " + r.path,
      columns: () => [
        {key: "kind", label: "finding", value: (r) => r.kind},
        {key: "allocated", label: "type", value: (r) => r.allocated},
        numberColumn("count", "times", (r) => r.count),
        {key: "what", label: "what happened", value: (r) => r.what},
        {key: "path", label: "release call path", value: (r) => r.path},
        {key: "allocation_path", label: "allocation call path", value: (r) => r.allocation_path},
      ],
      note: () => (all.length ? formatCount(d3.sum(all, (r) => r.count)) + " releases the program got wrong, each " +
        "passed on to the allocator as it was (as `heaptype report` lists them); the whole run: the time range " +
        "and the page's filters do not apply." : "No mismatched free(), delete or delete[] was recorded."),
    });
    // the tab says how many there are: a page should not hide them behind a click
    return Object.assign(table, {count: d3.sum(all, (r) => r.count)});
  }

  function temporariesTable() {
    const flame = DATA.flame;
    const shape = treeShape(flame);
    const rows = () => {
      const out = [];
      for (let i = 0; i < shape.count; i++) {
        if (!flame.kind[i] || (state.type !== null && shape.nameOf(i) !== state.type)) continue;
        const figure = (m) => state.range ? compose(ranges.nodes[i], m) : flame.figures[m][i];
        const temporaries = figure("temporary_allocations");
        if (!temporaries) continue;
        out.push({label: shape.nameOf(i), path: pathOf(flame, shape, flame.parent[i]).join(" \u2192 "),
                  temporaries, allocations: figure("allocations")});
      }
      return out;
    };
    return makeTable({
      id: "temporaries-table", searchLabel: "temporaries", sort: "temporaries", rows,
      name: (r) => r.label + " " + r.path,
      columns: () => [
        {key: "label", label: "type", value: (r) => r.label},
        numberColumn("temporaries", "temporaries", (r) => r.temporaries),
        numberColumn("allocations", "allocations", (r) => r.allocations),
        numberColumn("share", "% temporary", (r) => (r.allocations ? r.temporaries / r.allocations : 0),
                     (v) => (100 * v).toFixed(1) + "%"),
        {key: "path", label: "call path", value: (r) => r.path},
      ],
      note: () => "Temporary allocations: freed as the program's next allocation event (as heaptrack counts them), " +
        "by call path and type" + (state.range ? ", between " + formatSeconds(rangeStart()) + " and " + formatSeconds(rangeEnd()) : "") + ".",
    });
  }

  // --- the memory view -------------------------------------------------------------------

  function memoryView() {
    const memory = DATA.memory;
    const element = el("div", {className: "memory-view"});
    if (!memory.available) {
      element.appendChild(el("p", {className: "note", id: "memory-unavailable", text: "Memory view: " + memory.reason + "."}));
      return {element, render: () => {}};
    }
    const title = el("p", {className: "note"});
    const canvas = el("canvas", {id: "memory-canvas"});
    const legend = el("div", {className: "memory-legend"});
    element.append(title, canvas, legend);
    function snapshot() {
      if (!state.range) return memory.snapshots[0];
      const end = rangeEnd();
      const before = memory.snapshots.slice(1).filter((s) => s.time_s <= end + 1e-9);
      return before.length ? before[before.length - 1] : memory.snapshots[0];
    }
    function render() {
      const shot = snapshot();
      const width = Math.max(600, element.clientWidth || 900);
      const GAP = 6;
      const span = d3.sum(shot.regions, (r) => r.end - r.start);
      const perPixel = Math.max(1, Math.ceil(span / (width * 160)));
      const starts = [];
      let position = 0;
      for (const r of shot.regions) { starts.push(position); position += Math.ceil((r.end - r.start) / perPixel) + GAP; }
      const rowsNeeded = Math.max(1, Math.ceil(position / width));
      canvas.width = width;
      canvas.height = rowsNeeded * 3;
      canvas.style.height = rowsNeeded * 3 + "px";
      const context = canvas.getContext("2d");
      context.fillStyle = "#f4f4f4";
      context.fillRect(0, 0, width, canvas.height);
      for (const [region, offset, length, kind] of shot.runs) {
        const name = memory.types[kind];
        context.fillStyle = state.type !== null && name !== state.type ? "#dddddd" : typeColour(name);
        const first = starts[region] + Math.floor(offset / perPixel);
        const last = starts[region] + Math.floor((offset + length - 1) / perPixel);
        for (let p = first; p <= last; p++) context.fillRect(p % width, Math.floor(p / width) * 3, 1, 3);
      }
      title.textContent = "The heap at " + formatSeconds(shot.time_s) + ": " + formatCount(shot.blocks) + " blocks, " +
        exactBytes(shot.bytes) + " in " + shot.regions.length + " regions; one pixel: " + formatBytes(perPixel) +
        " of addresses.";
      legend.textContent = "";
      for (const name of memory.types) {
        const item = el("span", {className: "legend-item"}, [el("span", {className: "swatch"}), el("span", {text: name})]);
        item.firstChild.style.background = typeColour(name);
        legend.appendChild(item);
      }
    }
    return {element, render};
  }

  // --- the diff page --------------------------------------------------------------------

  function drawDiffTimeline() {
    const container = document.getElementById("timeline");
    document.getElementById("timeline-title").textContent = "Live bytes over time: A (before) and B (after)";
    const sides = [["A", DATA.a.timeline, "#4e79a7"], ["B", DATA.b.timeline, "#e15759"]];
    const times = sides.flatMap(([, t]) => t.times_s);
    if (!times.length) return;
    const size = chartSize(container, 220);
    const {width, height, margin} = size;
    const x = d3.scaleLinear().domain(timeDomain([d3.min(times), d3.max(times)])).range([margin.left, width - margin.right]);
    const y = d3.scaleLinear().domain([0, Math.max(1, d3.max(sides, ([, t]) => t.peak_bytes)) * 1.08]).nice()
      .range([height - margin.bottom, margin.top]);
    const svg = d3.select(container).append("svg").attr("width", width).attr("height", height);
    const legend = document.getElementById("legend");
    for (const [name, timeline, colour] of sides) {
      const line = d3.line().x((t) => x(t)).y((_, i) => y(timeline.totals[i])).curve(d3.curveStepAfter);
      svg.append("path").attr("class", "total-line").attr("data-series", name).attr("stroke", colour)
        .attr("d", line(timeline.times_s));
      if (timeline.times_s.length) {  // the peak, visible even when the run is one point
        svg.append("circle").attr("class", "peak-dot").attr("data-series", name).attr("fill", colour).attr("r", 4)
          .attr("cx", x(timeline.peak_time_s)).attr("cy", y(timeline.peak_bytes));
      }
      const item = el("span", {className: "legend-item", "data-series": name}, [el("span", {className: "swatch"}),
        el("span", {text: name + ": peak " + exactBytes(timeline.peak_bytes) + " at " + formatSeconds(timeline.peak_time_s)})]);
      item.firstChild.style.background = colour;
      legend.appendChild(item);
    }
    axes(svg, size, x, y);
  }

  function deltaTable(id, rows, key, label) {
    const growth = (r) => r.growth_percent;
    return makeTable({
      id, searchLabel: label + "s", sort: "delta_peak", rows: () => rows.slice(), name: (r) => r[key],
      columns: () => [
        {key, label, value: (r) => r[key]},
        numberColumn("peak_a", "peak A", (r) => r.a.peak_bytes, formatBytes),
        numberColumn("peak_b", "peak B", (r) => r.b.peak_bytes, formatBytes),
        numberColumn("delta_peak", "peak delta", (r) => r.delta.peak_bytes, (v) => signed(v, exactBytes)),
        numberColumn("growth", "change", growth, (v) => (v > 0 ? "+" : "") + v.toFixed(1) + "%"),
        numberColumn("allocs_a", "allocs A", (r) => r.a.allocations),
        numberColumn("allocs_b", "allocs B", (r) => r.b.allocations),
        numberColumn("delta_bytes", "bytes delta", (r) => r.delta.bytes, (v) => signed(v, formatBytes)),
      ],
      note: () => "B minus A for every " + label + ", matched by name, as `heaptype diff --by " + label + "` prints it" +
        " (a change of \u2014 is a new " + label + ").",
    });
  }

  function diffFlame() {
    const flame = DATA.flame;
    const value = () => (i) => Math.max(flame.a[state.metric][i], flame.b[state.metric][i]);
    const rootValue = (shape, v) => d3.sum(shape.roots, v);
    const colour = (shape, i) => {
      const a = flame.a[state.metric][i], b = flame.b[state.metric][i];
      const most = Math.max(a, b);
      if (!most || a === b) return "#e8e8e8";
      const strength = 0.25 + 0.75 * Math.abs(b - a) / most;
      return b > a ? d3.interpolateRgb("#fbe3e3", "#d62728")(strength) : d3.interpolateRgb("#e3f5e3", "#2ca02c")(strength);
    };
    const tooltip = (shape, i) => {
      const exact = metricExact(state.metric);
      const a = flame.a[state.metric][i], b = flame.b[state.metric][i];
      return [[flame.kind[i] ? "type" : "function", shape.nameOf(i)], ["A", exact(a)], ["B", exact(b)],
              ["delta", signed(b - a, exact)], ["", "click to zoom"]];
    };
    const note = () => "The call paths of both profiles, each as wide as the larger of A and B: red grew, green shrank " +
      "(the deeper the colour, the larger the change)." + (flame.cut ? " Small paths are left out." : "");
    return flameView({flame, value, rootValue, tooltip, colour, note});
  }

  // --- the page ---------------------------------------------------------------------------

  // A failing budget test's page (budget/failure_page.py) opens with its failure text.
  function drawVerdict(verdict) {
    const element = document.getElementById("verdict");
    element.textContent = verdict.text + (verdict.types.length ? "\n\nThis page shows only " +
      verdict.types.join(", ") + "." : "");
    element.hidden = false;
  }

  function drawHead(lines, warnings) {
    document.getElementById("head-lines").textContent = lines.join("\n");
    const list = document.getElementById("warnings");
    for (const warning of warnings) list.appendChild(el("li", {text: warning}));
  }

  function flameSection(view) {
    const section = el("section", {id: "flame-section"}, [el("h2", {text: "Call paths and types"}), view.element]);
    document.getElementById("timeline-section").after(section);
    listeners.push(view.render);
  }

  function main() {
    if (DATA.kind === "diff") {
      drawHead(["A  " + DATA.a.path].concat(DATA.a.head.lines.slice(1).map((l) => "   " + l), ["", "B  " + DATA.b.path],
                                            DATA.b.head.lines.slice(1).map((l) => "   " + l)),
               DATA.a.head.warnings.concat(DATA.b.head.warnings));
      drawDiffTimeline();
      drawSelection();
      flameSection(diffFlame());
      drawTabs([
        Object.assign({id: "types", label: "Types"}, deltaTable("diff-types-table", DATA.types.rows, "type", "type")),
        Object.assign({id: "functions", label: "Functions"}, deltaTable("diff-functions-table", DATA.functions.rows, "name", "function")),
      ]);
    } else {
      if (DATA.verdict) drawVerdict(DATA.verdict);
      drawHead(DATA.head.lines, DATA.head.warnings);
      drawTimeline();
      drawGroupingChoice();
      drawSelection();
      flameSection(reportFlame());
      drawTabs([
        Object.assign({id: "types", label: "Types"}, typesTable()),
        Object.assign({id: "functions", label: "Functions"}, functionsTable()),
        Object.assign({id: "memory", label: "Memory"}, memoryView()),
        Object.assign({id: "leaks", label: "Leaks"}, leaksTable()),
        Object.assign({id: "findings", label: "Findings"}, findingsTable()),
        Object.assign({id: "temporaries", label: "Temporaries"}, temporariesTable()),
      ]);
    }
    setState({});
    // When the page was drawn, in ms from navigation start (bench/html_bench.py reads it).
    document.body.dataset.readyMs = performance.now().toFixed(1);
    document.body.dataset.ready = "1";
  }

  main();
})();

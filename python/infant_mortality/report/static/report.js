// Draws the report's figures and runs its controls (inlined into the HTML after the data).
//
// plotly.js and each figure's spec are embedded gzip-compressed and base64-encoded in a
// application/octet-stream script element (id: the figure id + "-data"), decoded when the
// figure is first shown (its region selected, its <details> opened). Below NARROW_PX a
// figure gets the changes listed in its layout.meta.narrow / trace meta.narrow; small
// multiples (layout.meta.grid) get as many columns as their width holds.
(function () {
  'use strict';
  var NARROW_PX = 600;  // infant_mortality.report.style.NARROW_PX
  // The page's messages in its language (infant_mortality.report.i18n, keys "js.*").
  var messages = JSON.parse(document.getElementById('report-messages').textContent);
  function msg(key, values) {
    return (messages[key] || key).replace(/\{(\w+)\}/g, function (_, k) { return values && k in values ? values[k] : ''; });
  }
  var config = {responsive: true, displaylogo: false, scrollZoom: false, locale: messages.locale,
                toImageButtonOptions: {format: 'png', scale: 2}};

  function decodeText(id) {
    var el = document.getElementById(id);
    var bytes = Uint8Array.from(atob(el.textContent.trim()), function (c) { return c.charCodeAt(0); });
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
    return new Response(stream).text();
  }
  function decodeSpec(id) { return decodeText(id).then(JSON.parse); }

  // plotly.js itself is embedded compressed too (a third of its size): run it once decoded.
  var plotlyReady = window.Plotly ? Promise.resolve() : decodeText('plotly-js').then(function (src) {
    var s = document.createElement('script');
    s.textContent = src;
    document.head.appendChild(s);
    // The mode bar's tooltips in the page's language.
    var dictionary = {};
    Object.keys(messages).forEach(function (k) { if (k.indexOf('modebar.') === 0) dictionary[k.slice(8)] = messages[k]; });
    Plotly.register({moduleType: 'locale', name: messages.locale, dictionary: dictionary, format: {}});
    document.documentElement.setAttribute('data-plotly-ms', String(Math.round(performance.now())));
  });

  // obj['a.b[0].c'] = value, creating the objects on the way.
  function setPath(obj, path, value) {
    var keys = path.replace(/\[(\d+)\]/g, '.$1').split('.');
    for (var i = 0; i < keys.length - 1; i++) {
      if (obj[keys[i]] === undefined || obj[keys[i]] === null) obj[keys[i]] = /^\d+$/.test(keys[i + 1]) ? [] : {};
      obj = obj[keys[i]];
    }
    obj[keys[keys.length - 1]] = value;
  }

  // Small multiples: columns from the width; every panel's axes placed on the grid.
  function layoutGrid(layout, width) {
    var g = layout.meta && layout.meta.grid;
    if (!g) return 0;
    var m = layout.margin || {};
    var inner = width - (m.l || 0) - (m.r || 0);
    var ncols = Math.max(1, Math.min(g.max_cols, Math.floor(inner / g.min_panel_px), g.n));
    var nrows = Math.ceil(g.n / ncols);
    var rowPx = ncols === 1 ? g.row_px_narrow : g.row_px;
    var w = (1 - (ncols - 1) * g.hspace) / ncols;
    var lines = wrapPanelTitles(layout, (w + g.hspace) * inner);
    var gapPx = Math.max(g.gap_px, TITLE_LINE_PX * lines + 24);  // 4 lines fit the usual gap
    var plotPx = nrows * rowPx + (nrows - 1) * gapPx;
    layout.height = plotPx + (m.t || 0) + (m.b || 0);
    for (var i = 0; i < g.n; i++) {
      var r = Math.floor(i / ncols), c = i % ncols, s = i === 0 ? '' : String(i + 1);
      var top = 1 - r * (rowPx + gapPx) / plotPx;
      layout['xaxis' + s].domain = [c * (w + g.hspace), c * (w + g.hspace) + w];
      layout['yaxis' + s].domain = [Math.max(0, top - rowPx / plotPx), top];
    }
    return ncols;
  }

  // Breaks a plotly text (lines separated by <br>, may hold <span> tags) at spaces so that no
  // line is longer than maxChars visible characters. A space inside a tag (<span style=...>) is
  // not a place to break.
  function wrap(text, maxChars) {
    if (typeof text !== 'string') return text;
    var kept = text.replace(/<[^>]*>/g, function (tag) { return tag.replace(/ /g, '\u0001'); });
    return kept.split('<br>').map(function (line) {
      var out = [], cur = '';
      line.split(' ').forEach(function (w) {
        var cand = cur ? cur + ' ' + w : w;
        if (cur && cand.replace(/<[^>]*>/g, '').length > maxChars) { out.push(cur); cur = w; } else cur = cand;
      });
      out.push(cur);
      return out.join('<br>');
    }).join('<br>').replace(/\u0001/g, ' ');
  }

  // Small multiples' panel titles (annotations on an axis' domain) wrapped to their column's
  // width, so that a long name ("Región de Aysén del General Carlos Ibáñez del Campo", 51
  // characters) is not cut at the figure's edge; returns the most lines a title takes. A line in
  // smaller type (<span style='font-size:10px'>) holds more characters.
  var TITLE_LINE_PX = 15, TITLE_CHAR_PX = 7.5;  // 12 px bold type: about 7 px a character
  function wrapPanelTitles(layout, columnPx) {
    var lines = 1;
    (layout.annotations || []).forEach(function (a) {
      if (!/ domain$/.test(a.xref || '') || typeof a.text !== 'string') return;
      a.text = a.text.split('<br>').map(function (line) {
        var size = /font-size:\s*(\d+)px/.exec(line), px = TITLE_CHAR_PX * (size ? Number(size[1]) / 12 : 1);
        return wrap(line, Math.max(12, Math.floor(columnPx / px)));
      }).join('<br>');
      lines = Math.max(lines, a.text.split('<br>').length);
    });
    return lines;
  }

  function wrapTitles(layout, width) {
    var chars = Math.max(20, Math.floor((width - 16) / 7));  // 12 px type: about 7 px a character
    if (layout.title) layout.title.text = wrap(layout.title.text, chars);
    ['xaxis', 'yaxis'].forEach(function (ax) {
      if (layout[ax] && layout[ax].title) layout[ax].title.text = wrap(layout[ax].title.text, chars);
    });
  }

  // The option chosen in a figure's menu (layout.meta.menu[i].args: plotly's update arguments,
  // [trace changes, layout changes]; a trace change is one value per trace, null for unchanged).
  function applyOption(data, layout, option) {
    var traces = option.args[0] || {}, relayout = option.args[1] || {};
    Object.keys(traces).forEach(function (k) {
      var v = traces[k];
      data.forEach(function (t, i) {
        var value = Array.isArray(v) ? v[i] : v;
        if (value !== null && value !== undefined) setPath(t, k, value);
      });
    });
    Object.keys(relayout).forEach(function (k) { setPath(layout, k, relayout[k]); });
  }

  function prepare(spec, width, choice) {
    var data = JSON.parse(JSON.stringify(spec.data)), layout = JSON.parse(JSON.stringify(spec.layout));
    var menu = (layout.meta && layout.meta.menu) || [];
    if (menu[choice]) applyOption(data, layout, menu[choice]);
    var narrow = width < NARROW_PX;
    if (narrow) {
      var changes = (layout.meta && layout.meta.narrow) || {};
      Object.keys(changes).forEach(function (k) { setPath(layout, k, changes[k]); });
      data.forEach(function (t) {
        var tc = (t.meta && t.meta.narrow) || {};
        Object.keys(tc).forEach(function (k) { setPath(t, k, tc[k]); });
      });
      wrapTitles(layout, width);
    }
    var ncols = layoutGrid(layout, width);
    return {data: data, layout: layout, state: (narrow ? 'n' : 'w') + ncols};
  }

  // Names that would overlap an earlier one (the figures list the most important first) are
  // hidden; hovering or tapping the point still shows it.
  function hideCollidingLabels(div) {
    var GAP = 2;  // px between two names
    // The figure's own notes (annotations) stay; names give way to them.
    var kept = Array.prototype.map.call(div.querySelectorAll('g.annotation-text-g'), function (a) {
      return a.getBoundingClientRect();
    }), hidden = 0;
    div.querySelectorAll('g.textpoint text').forEach(function (el) {
      el.style.display = '';
      if (!el.textContent) return;
      var r = el.getBoundingClientRect();
      var clash = kept.some(function (k) {
        return Math.min(r.right, k.right) - Math.max(r.left, k.left) > -GAP &&
               Math.min(r.bottom, k.bottom) - Math.max(r.top, k.top) > -GAP;
      });
      if (clash) { el.style.display = 'none'; hidden++; } else kept.push(r);
    });
    div.setAttribute('data-hidden-labels', String(hidden));
  }

  function choice(div) {
    var sel = document.getElementById(div.id + '-menu');
    return sel ? Number(sel.value) : 0;
  }

  var specs = {};  // figure id -> decoded spec
  function draw(div) {
    var spec = specs[div.id], width = div.clientWidth || window.innerWidth;
    var p = prepare(spec, width, choice(div));
    div.setAttribute('data-state', p.state);
    // On a phone the tool bar would cover the title; pinch and tap still work.
    var cfg = Object.assign({}, config, {displayModeBar: p.state.charAt(0) === 'n' ? false : 'hover'});
    // A responsive figure takes its height from its box after a window resize: without a fixed box
    // height the next menu choice collapsed it to 200 px (seen in Chromium after a resize).
    if (p.layout.height) div.style.height = p.layout.height + 'px';
    return Plotly.react(div, p.data, p.layout, cfg).then(function () {
      if (!div.getAttribute('data-collisions')) {  // after every redraw (zoom, legend clicks) too
        div.setAttribute('data-collisions', '1');
        div.on('plotly_afterplot', function () { hideCollidingLabels(div); });
      }
      hideCollidingLabels(div);
    });
  }
  // A figure's menu redraws it with the chosen option.
  document.querySelectorAll('select.figure-select').forEach(function (sel) {
    sel.addEventListener('change', function () {
      var div = document.getElementById(sel.getAttribute('data-figure'));
      if (div.getAttribute('data-rendered') === '1') draw(div);
    });
  });

  function visibleFigures() {
    return Array.prototype.filter.call(document.querySelectorAll('div.figure[data-fig]'), function (div) {
      return div.offsetParent !== null;
    });
  }

  var pending = plotlyReady.catch(function (e) { reportError('plotly.js: ' + e); });
  function renderVisible() {
    var tablesDone = fillTables();
    visibleFigures().forEach(function (div) {
      if (div.getAttribute('data-rendered')) return;
      div.setAttribute('data-rendered', 'pending');
      pending = pending.then(function () {
        return decodeSpec(div.getAttribute('data-fig')).then(function (spec) {
          specs[div.id] = spec;
          return draw(div);
        }).then(function () {
          div.setAttribute('data-rendered', '1');
          var root = document.documentElement;  // time to the first figure, from navigation start
          if (!root.getAttribute('data-first-figure-ms')) {
            root.setAttribute('data-first-figure-ms', String(Math.round(performance.now())));
          }
        }).catch(function (e) { reportError(div.id + ': ' + e); });
      });
    });
    return Promise.all([pending, tablesDone]).then(function () {
      scrollHints();
      var root = document.documentElement;
      root.setAttribute('data-render-ms', String(Math.round(performance.now())));  // from navigation start
      root.setAttribute('data-scroll-width', String(root.scrollWidth));
      root.setAttribute('data-client-width', String(root.clientWidth));
    });
  }
  window.renderVisible = renderVisible;

  // A figure crossing the narrow width, or whose grid needs other columns, is redrawn.
  var resizeTimer = null;
  window.addEventListener('resize', function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () {
      visibleFigures().forEach(function (div) {
        if (div.getAttribute('data-rendered') !== '1') return;
        if (prepare(specs[div.id], div.clientWidth, choice(div)).state !== div.getAttribute('data-state')) draw(div);
      });
      scrollHints();
    }, 150);
  });

  // Region selector; the choice is kept in the address (#region=13) so it can be linked.
  var select = document.getElementById('region-select');
  function showRegion(code) {
    document.querySelectorAll('section.region-block').forEach(function (s) {
      s.style.display = s.getAttribute('data-region') === code ? '' : 'none';
    });
    renderVisible();
  }
  if (select) {
    var m = /region=([^&]+)/.exec(location.hash);
    if (m && select.querySelector('option[value="' + m[1] + '"]')) select.value = m[1];
    else if (m) {  // an unknown region in the address: say which one is shown instead
      var notice = document.getElementById('region-notice');
      notice.textContent = msg('unknown_region', {code: decodeURIComponent(m[1]),
                                                  shown: select.options[select.selectedIndex].text});
      notice.hidden = false;
    }
    select.addEventListener('change', function () {
      history.replaceState(null, '', '#region=' + select.value);
      showRegion(select.value);
    });
    document.querySelectorAll('section.region-block').forEach(function (s) {
      s.style.display = s.getAttribute('data-region') === select.value ? '' : 'none';
    });
  }
  document.querySelectorAll('details').forEach(function (d) { d.addEventListener('toggle', renderVisible); });

  // Click-to-sort tables: numeric when both cells carry data-sort numbers, else text.
  document.querySelectorAll('table.sortable').forEach(function (table) {
    table.querySelectorAll('th').forEach(function (th, col) {
      th.tabIndex = 0;  // sortable from the keyboard too
      th.addEventListener('keydown', function (e) {
        if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); th.click(); }
      });
      th.addEventListener('click', function () {
        var asc = !th.classList.contains('sorted-asc');
        table.querySelectorAll('th').forEach(function (h) { h.classList.remove('sorted-asc', 'sorted-desc'); });
        th.classList.add(asc ? 'sorted-asc' : 'sorted-desc');
        var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
        function key(r) { var c = r.cells[col], v = c.getAttribute('data-sort'); return v === null ? c.textContent : v; }
        rows.sort(function (a, b) {
          var x = key(a), y = key(b), nx = parseFloat(x), ny = parseFloat(y), r;
          if (x === '' && y === '') r = 0; else if (x === '') r = 1; else if (y === '') r = -1;
          else if (!isNaN(nx) && !isNaN(ny)) r = nx - ny; else r = x.localeCompare(y, 'es');
          return asc ? r : -r;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  // Comparison tables: the body is built from the embedded rows when the table is first shown;
  // the filter shows one indicator and period (or all).
  function filterTable(table) {
    var sel = document.querySelector('select.table-filter[data-table="' + table.id + '"]');
    Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
      r.style.display = (!sel || sel.value === '' || r.getAttribute('data-combo') === sel.value) ? '' : 'none';
    });
  }
  function fillTables() {
    var tables = Array.prototype.filter.call(document.querySelectorAll('table[data-rows]'), function (t) {
      return t.offsetParent !== null && !t.getAttribute('data-filled');
    });
    return Promise.all(tables.map(function (table) {
      table.setAttribute('data-filled', 'pending');
      return decodeSpec(table.getAttribute('data-rows')).then(function (spec) {
        var body = document.createElement('tbody');
        spec.rows.forEach(function (row) {
          var tr = document.createElement('tr');
          tr.setAttribute('data-combo', row[0]);
          row[1].forEach(function (cell) {
            var td = document.createElement('td');
            if (Array.isArray(cell)) {
              td.textContent = cell[0];
              if (cell.length < 3) { td.className = 'num'; td.setAttribute('data-sort', cell[1] === null ? '' : String(cell[1])); }
              else if (cell[2]) td.className = cell[2];
            } else td.textContent = cell;
            tr.appendChild(td);
          });
          body.appendChild(tr);
        });
        table.replaceChild(body, table.tBodies[0]);
        labelCells(table);
        table.setAttribute('data-filled', '1');
        filterTable(table);
        applyColumns(table);
      }).catch(function (e) { reportError(table.id + ': ' + e); });
    }));
  }
  document.querySelectorAll('select.table-filter').forEach(function (sel) {
    sel.addEventListener('change', function () {
      filterTable(document.getElementById(sel.getAttribute('data-table')));
      scrollHints();
    });
  });
  // Each cell carries its column's name: on a phone report.css lays every row out as a card of
  // "column: value" lines (no number off screen). The roles keep the table's semantics for screen
  // readers once CSS no longer displays it as a table.
  function labelCells(table) {
    var head = table.tHead ? Array.prototype.map.call(table.tHead.rows[0].cells, function (th) {
      return th.textContent.trim(); }) : [];
    table.setAttribute('role', 'table');
    Array.prototype.forEach.call(table.querySelectorAll('thead, tbody'), function (g) { g.setAttribute('role', 'rowgroup'); });
    Array.prototype.forEach.call(table.rows, function (r) {
      r.setAttribute('role', 'row');
      Array.prototype.forEach.call(r.cells, function (c, i) {
        if (c.tagName === 'TH') { c.setAttribute('role', c.getAttribute('scope') === 'row' ? 'rowheader' : 'columnheader'); return; }
        c.setAttribute('role', 'cell');
        if (head[i]) c.setAttribute('data-label', head[i]);
      });
    });
  }
  document.querySelectorAll('table.data').forEach(labelCells);
  // Column chooser: the unticked columns of a table are hidden.
  function applyColumns(table) {
    var boxes = document.querySelectorAll('input[data-table="' + table.id + '"][data-col]');
    if (!boxes.length) return;
    var hide = {};
    boxes.forEach(function (b) { hide[b.getAttribute('data-col')] = !b.checked; });
    Array.prototype.forEach.call(table.rows, function (r) {
      Array.prototype.forEach.call(r.cells, function (c, i) { c.style.display = hide[i] ? 'none' : ''; });
    });
    scrollHints();
  }
  document.querySelectorAll('input[data-col]').forEach(function (b) {
    b.addEventListener('change', function () { applyColumns(document.getElementById(b.getAttribute('data-table'))); });
  });
  document.querySelectorAll('table.data').forEach(applyColumns);
  // A box that holds more than it shows says so.
  function scrollHints() {
    document.querySelectorAll('.table-wrap[data-hint-for]').forEach(function (box) {
      var hint = document.getElementById(box.getAttribute('data-hint-for') + '-hint');
      if (!hint || box.offsetParent === null) return;
      var more = box.scrollWidth > box.clientWidth + 1 || box.scrollHeight > box.clientHeight + 1;
      hint.textContent = more ? msg('scroll_hint') : '';
      hint.hidden = !more;
      box.classList.toggle('scrolls', more);
    });
  }
  // #...&show=fig-map-13 opens and scrolls to that figure (links and screenshots).
  var show = /show=([^&]+)/.exec(location.hash);
  var target = show && document.getElementById(show[1]);
  if (target) {
    var details = target.closest('details');
    if (details) details.open = true;
  }
  renderVisible().then(function () { if (target) target.scrollIntoView(); });
})();

/// The console's two static files, served from 'self' so the Content-Security-Policy needs no
/// inline script or style. The pages work without the script; it only keeps the queue counts
/// current through server-sent events.
enum StaticFiles {
    /// Light and dark from the browser's preference; tables scroll sideways on a phone.
    static let css = """
        :root { color-scheme: light dark; --bg: #fff; --fg: #1b1f24; --muted: #57606a; --line: #d0d7de;
          --accent: #0a58ca; --bad: #b42318; --good: #1a7f37; --warn: #9a6700; --panel: #f6f8fa; }
        @media (prefers-color-scheme: dark) {
          :root { --bg: #0d1117; --fg: #e6edf3; --muted: #9198a1; --line: #30363d; --accent: #58a6ff;
            --bad: #ff7b72; --good: #56d364; --warn: #e3b341; --panel: #161b22; } }
        * { box-sizing: border-box; }
        body { margin: 0; font: 16px/1.5 system-ui, sans-serif; background: var(--bg); color: var(--fg); }
        a { color: var(--accent); }
        .skip { position: absolute; left: -999px; } .skip:focus { left: 1rem; top: 1rem; }
        header { border-bottom: 1px solid var(--line); background: var(--panel); }
        nav { display: flex; flex-wrap: wrap; align-items: center; gap: .5rem 1.5rem; padding: .5rem 1rem; }
        nav ul { display: flex; flex-wrap: wrap; gap: 1rem; list-style: none; margin: 0; padding: 0; }
        nav a[aria-current] { font-weight: 700; text-decoration: none; }
        .brand { font-weight: 700; text-decoration: none; color: var(--fg); }
        .logout { margin-left: auto; display: flex; gap: .5rem; align-items: center; }
        main { padding: 1rem; max-width: 80rem; margin: 0 auto; }
        .banner, .notice, .problem { padding: .5rem 1rem; margin: 0; }
        .banner { background: var(--panel); color: var(--warn); }
        .notice { border-left: 4px solid var(--good); background: var(--panel); }
        .problem { border-left: 4px solid var(--bad); background: var(--panel); }
        .wrap { overflow-x: auto; }
        table { border-collapse: collapse; width: 100%; }
        th, td { text-align: left; padding: .35rem .6rem; border-bottom: 1px solid var(--line); vertical-align: top; }
        thead th { font-size: .85rem; color: var(--muted); }
        td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
        /* Long text (URLs, errors, names) breaks anywhere, but in a cell wide enough to read: a cell
           that could shrink to one character showed a URL a few characters a line on a phone. The
           table then scrolls inside its .wrap instead of the page. */
        td.url, td.error, td.reason { overflow-wrap: anywhere; min-width: 14rem; max-width: 36rem; }
        td.error, td.reason { min-width: 10rem; max-width: 28rem; }
        th.name, td.name { overflow-wrap: anywhere; min-width: 7rem; max-width: 22rem; }
        .url code { overflow-wrap: anywhere; }
        h1 { overflow-wrap: anywhere; }
        .error { color: var(--bad); }
        .state { font-size: .85rem; padding: 0 .4rem; border: 1px solid var(--line); border-radius: 1rem; }
        .state.dead { color: var(--bad); } .state.succeeded { color: var(--good); } .state.retrying { color: var(--warn); }
        form { margin: 0; }
        button, .button { font: inherit; padding: .3rem .8rem; border: 1px solid var(--line); border-radius: .3rem;
          background: var(--panel); color: var(--fg); cursor: pointer; text-decoration: none; display: inline-block; }
        input, select { font: inherit; padding: .3rem; border: 1px solid var(--line); border-radius: .3rem;
          background: var(--bg); color: var(--fg); max-width: 100%; }
        /* Fields grow to fill each row and wrap whole; time fields are wide enough for their
           placeholder; the buttons stay together at the end of the last row. */
        .filters { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: end; margin-bottom: 1rem; }
        .filters p { margin: 0; display: flex; flex-direction: column; flex: 1 1 10rem; min-width: 0; }
        .filters p.time { flex: 2 1 16rem; }
        .filters p.buttons { flex: 0 0 auto; flex-direction: row; align-items: center; gap: .75rem; }
        .filters input, .filters select { width: 100%; }
        .login { max-width: 24rem; } .login input { width: 100%; }
        .login p { display: flex; flex-direction: column; }
        .hint { color: var(--muted); font-size: .9rem; }
        .facts { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; }
        .facts dt { color: var(--muted); } .facts dd { margin: 0; min-width: 0; overflow-wrap: anywhere; }
        pre { background: var(--panel); padding: .6rem; overflow-x: auto; white-space: pre-wrap; word-break: break-all; }
        .timeline { list-style: none; padding-left: 1rem; border-left: 3px solid var(--line); }
        .timeline li { margin: 0 0 1rem; position: relative; }
        .timeline li::before { content: ""; position: absolute; left: -1.45rem; top: .45rem; width: .7rem; height: .7rem;
          border-radius: 50%; background: var(--muted); }
        .timeline li.ok::before { background: var(--good); } .timeline li.failed::before { background: var(--bad); }
        .timeline p { margin: 0; }
        .pages { display: flex; gap: 1rem; margin-top: 1rem; }
        .tiles { display: grid; grid-template-columns: repeat(auto-fill, minmax(9rem, 1fr)); gap: .75rem;
          list-style: none; margin: .5rem 0; padding: 0; }
        .tile { display: flex; flex-direction: column; padding: .6rem .8rem; border: 1px solid var(--line);
          border-radius: .5rem; background: var(--panel); min-width: 0; }
        .tile.wide { grid-column: span 2; }
        .tile .label { color: var(--muted); font-size: .85rem; }
        .tile .value { font-size: 1.5rem; font-weight: 600; font-variant-numeric: tabular-nums; overflow-wrap: anywhere; }
        .tile.wide .value { font-size: 1.15rem; }
        .chart-box { margin: .5rem 0 0; }
        .chart { display: block; width: 100%; height: 8rem; border-bottom: 1px solid var(--line); }
        .chart .ok, .swatch.ok { fill: var(--good); background: var(--good); }
        .chart .failed, .swatch.failed { fill: var(--bad); background: var(--bad); }
        .chart g:hover rect { opacity: .7; }
        .swatch { display: inline-block; width: .8rem; height: .8rem; border-radius: .15rem; vertical-align: middle;
          margin: 0 .25rem 0 .75rem; }
        .axis { display: flex; justify-content: space-between; gap: .5rem; margin: .2rem 0; color: var(--muted);
          font-size: .8rem; font-variant-numeric: tabular-nums; }
        .crumbs { margin: 0; color: var(--muted); }
        .crumbs + h1 { margin-top: .2rem; }
        .links { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: center; margin: 0 0 1rem; }
        .links form.inline { display: inline; }
        h2 { font-size: 1.1rem; margin-top: 1.5rem; }
        .secret { display: block; padding: .6rem; background: var(--panel); border: 1px solid var(--line);
          font-size: 1.05rem; word-break: break-all; user-select: all; }
        .header-names { margin: 0; padding-left: 1.2rem; }
        @media (max-width: 40rem) { th, td { padding: .3rem; } body { font-size: 15px; }
          .tiles { grid-template-columns: repeat(2, minmax(0, 1fr)); } .tile .value { font-size: 1.25rem; }
          .facts { grid-template-columns: minmax(0, 1fr); } .facts dd { margin-bottom: .4rem; }
          .logout { margin-left: 0; } }
        """

    /// Subscribes to `/events` (one shared reader on the server) and writes the numbers into
    /// the queue table's cells.
    static let liveJS = """
        "use strict";
        (function () {
          var table = document.getElementById("queues");
          var status = document.getElementById("live-status");
          if (!table || !window.EventSource) { return; }
          var source = new EventSource("/events");
          source.addEventListener("queues", function (message) {
            var data;
            try { data = JSON.parse(message.data); } catch (e) { return; }
            data.queues.forEach(function (queue) {
              var rows = table.querySelectorAll("tr[data-queue]");
              for (var i = 0; i < rows.length; i++) {
                if (rows[i].getAttribute("data-queue") !== queue.name) { continue; }
                ["pending", "running", "retrying", "dead", "succeeded", "lag"].forEach(function (field) {
                  var cell = rows[i].querySelector("[data-field='" + field + "']");
                  if (!cell) { return; }
                  var target = cell.querySelector("a") || cell;
                  target.textContent = String(queue[field]);
                });
              }
            });
            ["pending", "running", "retrying", "dead", "succeeded"].forEach(function (field) {
              var cell = document.querySelector("[data-total='" + field + "']");
              if (!cell) { return; }
              var sum = 0;
              data.queues.forEach(function (queue) { sum += queue[field] || 0; });
              cell.textContent = String(sum);
            });
            if (status) { status.textContent = "Live: updated " + new Date().toLocaleTimeString(); }
          });
          source.addEventListener("problem", function () {
            if (status) { status.textContent = "Live updates paused: the database did not answer"; }
          });
          source.onerror = function () {
            if (status) { status.textContent = "Live updates disconnected; reload to reconnect"; }
          };
        })();
        """
}

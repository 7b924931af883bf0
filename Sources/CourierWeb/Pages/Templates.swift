import Mustache

/// The console's Mustache templates, compiled into the binary (no files to install, no
/// JavaScript build). `{{name}}` escapes HTML; the only triple mustache is the layout's
/// `{{{content}}}`, which holds a page these templates rendered.
enum Templates {
    /// Every template, parsed.
    static func library() throws -> MustacheLibrary {
        var library = MustacheLibrary()
        for (name, text) in all { try library.register(text, named: name) }
        return library
    }

    static let all: [String: String] = [
        "layout": layout, "login": login, "queues": queues, "jobs": jobs, "job": job,
        "requeueAll": requeueAll, "destinations": destinations, "message": message, "filters": filters,
        "csrf": csrf, "content": content, "endpoints": endpoints, "endpoint": endpoint,
        "rotatedSecret": rotatedSecret, "webhookMessages": webhookMessages, "webhookMessage": webhookMessage,
        "traffic": traffic, "queue": queue, "destination": destination,
    ]

    /// A page's template over its view (`PageContent`): inside the section the page's own keys
    /// come from the view, and `csrf` and `actions`, which every page shares, from around it.
    static let content = "{{#view}}{{>*template}}{{/view}}"

    static let csrf = #"<input type="hidden" name="csrf" value="{{csrf}}">"#

    static let layout = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="referrer" content="no-referrer">
        <title>{{title}} · Courier</title>
        <link rel="stylesheet" href="/static/style.css">
        {{#live}}<script src="/static/live.js" defer></script>{{/live}}
        </head>
        <body>
        <a class="skip" href="#main">Skip to content</a>
        <header>
        <nav aria-label="Main">
        <a class="brand" href="/queues">Courier</a>
        {{#user}}
        <ul>
        {{#nav}}<li><a href="{{href}}"{{#current}} aria-current="page"{{/current}}>{{label}}</a></li>{{/nav}}
        </ul>
        <form class="logout" method="post" action="/logout">{{> csrf}}<span>{{user}}</span> <button type="submit">Log out</button></form>
        {{/user}}
        </nav>
        {{#readOnly}}<p class="banner">Read-only console: every action is off.</p>{{/readOnly}}
        </header>
        <main id="main">
        {{#notice}}<p class="notice" role="status">{{notice}}</p>{{/notice}}
        {{#problem}}<p class="problem" role="alert">{{problem}}</p>{{/problem}}
        {{{content}}}
        </main>
        </body>
        </html>
        """

    static let login = """
        <h1>Log in</h1>
        <form class="login" method="post" action="/login">
        <input type="hidden" name="next" value="{{next}}">
        <p><label for="name">Your name <small>(written to the audit log with what you do)</small></label>
        <input id="name" name="name" autocomplete="username" required maxlength="100" value="{{name}}"></p>
        <p><label for="password">Password</label>
        <input id="password" name="password" type="password" autocomplete="current-password" required></p>
        <p><button type="submit">Log in</button></p>
        </form>
        """

    static let queues = """
        <h1>Queues</h1>
        <section aria-labelledby="totals-heading">
        <h2 id="totals-heading">All queues now</h2>
        <ul class="tiles" id="totals">
        <li class="tile"><span class="label">Pending</span><span class="value" data-total="pending">{{totals.pending}}</span></li>
        <li class="tile"><span class="label">Running</span><span class="value" data-total="running">{{totals.running}}</span></li>
        <li class="tile"><span class="label">Retrying</span><span class="value" data-total="retrying">{{totals.retrying}}</span></li>
        <li class="tile"><span class="label">Dead</span><span class="value" data-total="dead">{{totals.dead}}</span></li>
        <li class="tile"><span class="label">Succeeded, kept</span><span class="value" data-total="succeeded">{{totals.succeeded}}</span></li>
        </ul>
        <p class="hint" id="live-status">{{#hasQueues}}Counts as of loading the page{{/hasQueues}}</p>
        </section>
        {{#traffic}}{{> traffic}}{{/traffic}}
        <section aria-labelledby="queues-heading">
        <h2 id="queues-heading">Per queue</h2>
        {{#hasQueues}}
        <div class="wrap"><table id="queues">
        <thead><tr><th scope="col">Queue</th><th scope="col" class="n">Pending</th><th scope="col" class="n">Running</th>
        <th scope="col" class="n">Retrying</th><th scope="col" class="n">Dead</th><th scope="col" class="n">Succeeded</th>
        <th scope="col" class="n">Oldest due</th><th scope="col">State</th>
        {{#actions}}<th scope="col">Action</th>{{/actions}}</tr></thead>
        <tbody>
        {{#queues}}
        <tr data-queue="{{name}}">
        <th scope="row" class="name">{{#path}}<a href="{{path}}">{{name}}</a>{{/path}}{{^path}}{{name}}{{/path}}</th>
        <td class="n" data-field="pending"><a href="/jobs?state=pending&amp;queue={{query}}">{{pending}}</a></td>
        <td class="n" data-field="running">{{running}}</td>
        <td class="n" data-field="retrying">{{retrying}}</td>
        <td class="n" data-field="dead"><a href="/dead?queue={{query}}">{{dead}}</a></td>
        <td class="n" data-field="succeeded">{{succeeded}}</td>
        <td class="n" data-field="lag">{{lag}}</td>
        <td data-field="paused">{{#paused}}<strong>paused</strong>{{/paused}}{{^paused}}active{{/paused}}</td>
        {{#actions}}<td><form method="post" action="/queues/{{#paused}}resume{{/paused}}{{^paused}}pause{{/paused}}">{{> csrf}}
        <input type="hidden" name="queue" value="{{name}}">
        <button type="submit">{{#paused}}Resume{{/paused}}{{^paused}}Pause{{/paused}}</button></form></td>{{/actions}}
        </tr>
        {{/queues}}
        </tbody></table></div>
        {{/hasQueues}}
        {{^hasQueues}}<p>No queue has jobs or settings yet.</p>{{/hasQueues}}
        <p class="hint">Pending counts every waiting job, due or scheduled later; oldest due is the age of the
        oldest pending or retrying job whose time has come; succeeded counts the succeeded jobs still kept (each
        queue's retention, 7 days unless set).</p>
        </section>
        """

    /// The last hour of attempts (a `TrafficView`): figures, then one SVG bar per minute.
    static let traffic = """
        <section class="traffic" aria-labelledby="traffic-heading">
        <h2 id="traffic-heading">Last hour, {{scope}}</h2>
        <ul class="tiles" id="traffic-figures">
        <li class="tile"><span class="label">Delivered</span><span class="value" data-figure="delivered">{{delivered}}</span></li>
        <li class="tile"><span class="label">Failed</span><span class="value" data-figure="failed">{{failed}}</span></li>
        <li class="tile"><span class="label">Error rate</span><span class="value" data-figure="error-rate">{{errorRate}}</span></li>
        <li class="tile wide"><span class="label">Latency p50 / p95 / p99</span><span class="value" data-figure="latency">{{p50}} / {{p95}} / {{p99}}</span></li>
        </ul>
        {{#chart}}<figure class="chart-box">
        <svg class="chart" id="traffic-chart" viewBox="0 0 {{width}} {{height}}" preserveAspectRatio="none" role="img"
        aria-label="Attempts per minute over the last hour, {{scope}}: {{summary}}">
        {{#bars}}<g><title>{{title}}</title><rect class="ok" x="{{x}}" y="{{deliveredY}}" width="{{barWidth}}" height="{{deliveredHeight}}"/><rect class="failed" x="{{x}}" y="{{failedY}}" width="{{barWidth}}" height="{{failedHeight}}"/></g>
        {{/bars}}</svg>
        <p class="axis"><span>{{from}} UTC</span><span>{{#hasAttempts}}top {{scale}} a minute{{/hasAttempts}}</span><span>{{to}} UTC, now</span></p>
        <figcaption class="hint"><span id="traffic-summary">{{summary}}</span>
        <span class="legend"><span class="swatch ok"></span>delivered (2xx) <span class="swatch failed"></span>failed or no answer</span></figcaption>
        </figure>{{/chart}}
        <p class="hint">From the attempts table: every attempt that finished in each minute, whenever the console started
        (read for every queue and host at once, and kept for a few seconds).</p>
        </section>
        """

    static let queue = """
        <p class="crumbs"><a href="/queues">Queues</a> /</p>
        <h1><span class="name">{{name}}</span> {{#paused}}<span class="state dead">paused</span>{{/paused}}{{^paused}}<span class="state succeeded">active</span>{{/paused}}</h1>
        <div class="links"><a href="/jobs?queue={{query}}">Its jobs</a> · <a href="/dead?queue={{query}}">Its dead letters</a>
        {{#actions}}{{#path}}<form class="inline" method="post" action="/queues/{{#paused}}resume{{/paused}}{{^paused}}pause{{/paused}}">{{> csrf}}
        <input type="hidden" name="queue" value="{{name}}"><input type="hidden" name="back" value="{{path}}">
        <button type="submit">{{#paused}}Resume{{/paused}}{{^paused}}Pause{{/paused}}</button></form>{{/path}}{{/actions}}</div>
        <section aria-labelledby="states-heading">
        <h2 id="states-heading">Jobs by state</h2>
        <ul class="tiles" id="states">
        {{#states}}<li class="tile"><a class="label" href="{{link}}">{{state}}</a><span class="value" data-state="{{state}}">{{jobs}}</span></li>
        {{/states}}</ul>
        <p class="hint">Oldest due: {{lag}}. Finished jobs are counted while kept: succeeded ones for {{keptSucceeded}}.
        These are the maintained counts, exact however many jobs are kept.</p>
        </section>
        {{#traffic}}{{> traffic}}{{/traffic}}
        <section aria-labelledby="settings-heading">
        <h2 id="settings-heading">Settings</h2>
        <dl class="facts" id="settings">{{#settings}}<dt>{{label}}</dt><dd>{{value}}</dd>{{/settings}}</dl>
        </section>
        """

    static let destination = """
        <p class="crumbs"><a href="/destinations">Destinations</a> /</p>
        <h1><span class="name">{{host}}</span> {{#disabled}}<span class="state dead">disabled</span>{{/disabled}}{{^disabled}}<span class="state succeeded">enabled</span>{{/disabled}}</h1>
        {{#disabled}}<p class="problem" id="disabled">Disabled{{#disabledAt}} since {{disabledAt}}{{/disabledAt}}{{#disabledReason}}: {{disabledReason}}{{/disabledReason}}. No job to it is claimed until it is enabled.</p>{{/disabled}}
        <div class="links"><a href="/jobs?host={{query}}">Its jobs</a>
        {{#actions}}{{#path}}<form class="inline" method="post" action="/destinations/{{#disabled}}enable{{/disabled}}{{^disabled}}disable{{/disabled}}">{{> csrf}}
        <input type="hidden" name="host" value="{{host}}"><input type="hidden" name="back" value="{{path}}">
        <button type="submit">{{#disabled}}Enable{{/disabled}}{{^disabled}}Disable{{/disabled}}</button></form>{{/path}}{{/actions}}</div>
        <section aria-labelledby="now-heading">
        <h2 id="now-heading">Now</h2>
        <ul class="tiles" id="host-jobs">
        <li class="tile"><span class="label">Due</span><span class="value" data-field="due">{{due}}</span></li>
        <li class="tile"><span class="label">Later</span><span class="value" data-field="later">{{later}}</span></li>
        <li class="tile"><span class="label">Running</span><span class="value" data-field="running">{{running}}</span></li>
        <li class="tile"><span class="label">Breaker</span><span class="value" data-field="breaker">{{breaker}}</span></li>
        </ul>
        </section>
        {{#traffic}}{{> traffic}}{{/traffic}}
        <section aria-labelledby="settings-heading">
        <h2 id="settings-heading">Settings and breaker</h2>
        <dl class="facts" id="settings">{{#settings}}<dt>{{label}}</dt><dd>{{value}}</dd>{{/settings}}</dl>
        </section>
        """

    static let filters = """
        <form class="filters" method="get" action="{{action}}">
        <p><label for="f-queue">Queue</label><input id="f-queue" name="queue" value="{{filter.queue}}"></p>
        {{#showState}}<p><label for="f-state">State</label><select id="f-state" name="state">
        {{#states}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/states}}
        </select></p>{{/showState}}
        {{#showHost}}<p><label for="f-host">Host</label><input id="f-host" name="host" value="{{filter.host}}"></p>{{/showHost}}
        <p><label for="f-url">URL contains</label><input id="f-url" name="url" value="{{filter.url}}"></p>
        {{#showError}}<p><label for="f-error">Error contains</label><input id="f-error" name="error" value="{{filter.error}}"></p>{{/showError}}
        <p class="time"><label for="f-since">{{sinceLabel}} since</label><input id="f-since" name="since" value="{{filter.since}}" placeholder="2h or 2026-11-23T10:00Z"></p>
        <p class="time"><label for="f-until">{{sinceLabel}} before</label><input id="f-until" name="until" value="{{filter.until}}" placeholder="30m or 2026-11-23T12:00Z"></p>
        <p class="buttons"><button type="submit">Filter</button> <a href="{{action}}">Clear</a></p>
        </form>
        """

    static let jobs = """
        <h1>{{heading}}</h1>
        {{> filters}}
        {{#requeueAllLink}}<p><a class="button" href="{{requeueAllLink}}">Requeue all that match…</a></p>{{/requeueAllLink}}
        {{#searched}}<p class="hint" id="searched">{{searched}}</p>{{/searched}}
        {{#hasJobs}}
        <div class="wrap"><table id="jobs">
        <thead><tr><th scope="col">Job</th><th scope="col">Queue</th><th scope="col">State</th><th scope="col">Request</th>
        <th scope="col" class="n">Attempt</th><th scope="col">{{timeLabel}}</th><th scope="col" class="n">Last status</th><th scope="col">Last error</th>
        {{#rowActions}}<th scope="col">Action</th>{{/rowActions}}</tr></thead>
        <tbody>
        {{#jobs}}
        <tr data-job="{{id}}">
        <th scope="row"><a href="/jobs/{{id}}">{{id}}</a></th>
        <td>{{queue}}</td><td><span class="state {{state}}">{{state}}</span></td>
        <td class="url">{{method}} {{url}}</td>
        <td class="n">{{attempt}}/{{maxAttempts}}</td>
        <td><time datetime="{{timeISO}}">{{time}}</time></td>
        <td class="n">{{lastStatus}}</td><td class="error">{{lastError}}</td>
        {{#rowActions}}<td><form method="post" action="/jobs/{{id}}/requeue">{{> csrf}}<input type="hidden" name="back" value="{{back}}">
        <button type="submit">Requeue</button></form></td>{{/rowActions}}
        </tr>
        {{/jobs}}
        </tbody></table></div>
        <nav class="pages" aria-label="Pages">{{#firstPage}}<a href="{{firstPage}}">Newest</a>{{/firstPage}}
        {{#nextPage}}<a rel="next" href="{{nextPage}}">Older</a>{{/nextPage}}</nav>
        {{/hasJobs}}
        {{^hasJobs}}<p>No job matches.</p>{{/hasJobs}}
        """

    static let job = """
        <h1>Job {{id}} <span class="state {{state}}">{{state}}</span></h1>
        {{#canRequeue}}<form method="post" action="/jobs/{{id}}/requeue">{{> csrf}}<input type="hidden" name="back" value="/jobs/{{id}}">
        <button type="submit">Requeue this job</button></form>{{/canRequeue}}
        <dl class="facts">
        <dt>Queue</dt><dd><a href="/jobs?queue={{queueQuery}}">{{queue}}</a></dd>
        <dt>Attempt</dt><dd>{{attempt}} of {{maxAttempts}}</dd>
        <dt>Priority</dt><dd>{{priority}}</dd>
        <dt>Created</dt><dd>{{created}}</dd>
        <dt>Runs at</dt><dd>{{runAt}}</dd>
        {{#finished}}<dt>Finished</dt><dd>{{finished}}</dd>{{/finished}}
        {{#lockedBy}}<dt>Locked by</dt><dd>{{lockedBy}} until {{lockedUntil}}</dd>{{/lockedBy}}
        {{#idempotencyKey}}<dt>Idempotency key</dt><dd>{{idempotencyKey}}</dd>{{/idempotencyKey}}
        {{#lastError}}<dt>Last error</dt><dd class="error">{{lastError}}</dd>{{/lastError}}
        </dl>
        <section aria-labelledby="request-heading">
        <h2 id="request-heading">Request</h2>
        <p class="url"><code>{{method}} {{url}}</code></p>
        {{#hasHeaders}}<div class="wrap"><table class="headers"><thead><tr><th scope="col">Header</th><th scope="col">Value</th></tr></thead><tbody>
        {{#headers}}<tr><th scope="row">{{name}}</th><td>{{value}}</td></tr>{{/headers}}
        </tbody></table></div>{{/hasHeaders}}
        {{#body}}<h3>Body <small>({{bodyBytes}} bytes{{#bodyClipped}}, first part shown{{/bodyClipped}})</small></h3><pre class="body">{{body}}</pre>{{/body}}
        {{^body}}<p>No body.</p>{{/body}}
        </section>
        <section aria-labelledby="attempts-heading">
        <h2 id="attempts-heading">Attempts</h2>
        {{#hasAttempts}}<ol class="timeline" id="attempts">
        {{#attempts}}<li class="{{outcome}}"><p><strong>#{{attempt}}</strong> <time datetime="{{startedISO}}">{{started}}</time>
        · {{#status}}HTTP {{status}}{{/status}}{{^status}}no answer{{/status}} · {{duration}} · {{worker}}</p>
        {{#error}}<p class="error">{{error}}</p>{{/error}}
        {{#response}}<pre class="response">{{response}}</pre>{{/response}}</li>
        {{/attempts}}</ol>{{/hasAttempts}}
        {{^hasAttempts}}<p>No attempt yet.</p>{{/hasAttempts}}
        </section>
        <section aria-labelledby="history-heading">
        <h2 id="history-heading">History</h2>
        <ol class="history">{{#history}}<li><time datetime="{{iso}}">{{time}}</time> {{what}}</li>{{/history}}</ol>
        </section>
        """

    static let requeueAll = """
        <h1>Requeue dead jobs</h1>
        <p id="requeue-count"><strong>{{count}}</strong> dead {{#one}}job matches{{/one}}{{^one}}jobs match{{/one}} {{description}}.</p>
        {{#hasMatches}}
        <form method="post" action="/dead/requeue">{{> csrf}}
        {{#fields}}<input type="hidden" name="{{name}}" value="{{value}}">{{/fields}}
        <input type="hidden" name="max_id" value="{{maxID}}">
        <input type="hidden" name="expected" value="{{count}}">
        <p><button type="submit">Requeue {{count}} {{#one}}job{{/one}}{{^one}}jobs{{/one}}</button> <a href="{{back}}">Cancel</a></p>
        </form>
        {{/hasMatches}}
        {{^hasMatches}}<p><a href="{{back}}">Back to the dead letters</a></p>{{/hasMatches}}
        """

    static let destinations = """
        <h1>Destinations</h1>
        {{#hasDestinations}}
        <div class="wrap"><table id="destinations">
        <thead><tr><th scope="col">Host</th><th scope="col" class="n">Due</th><th scope="col" class="n">Later</th>
        <th scope="col" class="n">Running</th><th scope="col" class="n">Cap</th><th scope="col" class="n">Failure streak</th>
        <th scope="col">Breaker</th><th scope="col">State</th>
        {{#actions}}<th scope="col">Action</th>{{/actions}}</tr></thead>
        <tbody>
        {{#destinations}}
        <tr data-host="{{host}}">
        <th scope="row" class="name">{{#path}}<a href="{{path}}">{{host}}</a>{{/path}}{{^path}}{{host}}{{/path}}</th>
        <td class="n" data-field="due"><a href="/jobs?host={{query}}">{{due}}</a></td><td class="n" data-field="later">{{later}}</td>
        <td class="n" data-field="running">{{running}}</td><td class="n" data-field="cap">{{cap}}</td>
        <td class="n" data-field="streak">{{streak}}/{{threshold}}</td><td data-field="breaker">{{breaker}}</td>
        <td class="reason">{{#disabled}}<strong>disabled</strong> {{disabledReason}}{{/disabled}}{{^disabled}}enabled{{/disabled}}</td>
        {{#actions}}<td>{{#disabled}}<form method="post" action="/destinations/enable">{{> csrf}}
        <input type="hidden" name="host" value="{{host}}"><button type="submit">Enable</button></form>{{/disabled}}
        {{^disabled}}<form method="post" action="/destinations/disable">{{> csrf}}
        <input type="hidden" name="host" value="{{host}}"><button type="submit">Disable</button></form>{{/disabled}}</td>{{/actions}}
        </tr>
        {{/destinations}}
        </tbody></table></div>
        {{/hasDestinations}}
        {{^hasDestinations}}<p>No destination has jobs or settings yet.</p>{{/hasDestinations}}
        """

    static let endpoints = """
        <h1>Endpoints</h1>
        <form class="filters" method="get" action="/endpoints">
        <p><label for="f-tenant">Tenant</label><input id="f-tenant" name="tenant" value="{{filterTenant}}"></p>
        <p><button type="submit">Filter</button> <a href="/endpoints">Clear</a></p>
        </form>
        {{#truncated}}<p class="hint">{{truncated}}</p>{{/truncated}}
        {{#hasEndpoints}}
        <div class="wrap"><table id="endpoints">
        <thead><tr><th scope="col">Endpoint</th><th scope="col">Tenant</th><th scope="col">URL</th><th scope="col">Event types</th>
        <th scope="col">Queue</th><th scope="col">State</th><th scope="col" class="n">Last 100: ok / dead / waiting</th>
        <th scope="col">Last success</th><th scope="col" class="n">Secrets</th><th scope="col">Health</th></tr></thead>
        <tbody>
        {{#endpoints}}
        <tr data-endpoint="{{id}}">
        <th scope="row"><a href="/endpoints/{{id}}">{{id}}</a></th>
        <td>{{#tenant}}<a href="/endpoints?tenant={{tenantQuery}}">{{tenant}}</a>{{/tenant}}{{^tenant}}<span class="hint">none</span>{{/tenant}}</td>
        <td class="url">{{url}}</td><td>{{eventTypes}}</td><td>{{queue}}</td>
        <td data-field="state">{{#disabled}}<strong>disabled</strong> {{disabledReason}}{{/disabled}}{{^disabled}}enabled{{/disabled}}</td>
        <td class="n" data-field="recent">{{#recent}}{{ok}} / {{dead}} / {{waiting}}{{/recent}}</td>
        <td>{{#lastSuccess}}<time datetime="{{lastSuccessISO}}">{{lastSuccess}}</time>{{/lastSuccess}}{{^lastSuccess}}-{{/lastSuccess}}</td>
        <td class="n" data-field="secrets">{{secrets}}</td>
        <td data-field="health">{{health}}</td>
        </tr>
        {{/endpoints}}
        </tbody></table></div>
        {{/hasEndpoints}}
        {{^hasEndpoints}}<p>No endpoint matches.</p>{{/hasEndpoints}}
        """

    static let endpoint = """
        <h1>Endpoint {{id}} {{#disabled}}<span class="state dead">disabled</span>{{/disabled}}{{^disabled}}<span class="state succeeded">enabled</span>{{/disabled}}</h1>
        {{#canDisable}}<form method="post" action="/endpoints/{{id}}/disable">{{> csrf}}
        <button type="submit">Disable this endpoint</button></form>{{/canDisable}}
        {{#canEnable}}<form method="post" action="/endpoints/{{id}}/enable">{{> csrf}}
        <button type="submit">Enable this endpoint</button></form>{{/canEnable}}
        <dl class="facts">
        <dt>Tenant</dt><dd>{{#tenant}}<a href="/endpoints?tenant={{tenantQuery}}">{{tenant}}</a> · <a href="/messages?tenant={{tenantQuery}}">its messages</a>{{/tenant}}{{^tenant}}none (internal){{/tenant}}</dd>
        <dt>URL</dt><dd class="url"><code>{{url}}</code></dd>
        {{#description}}<dt>Description</dt><dd>{{description}}</dd>{{/description}}
        <dt>Event types</dt><dd>{{eventTypes}}</dd>
        {{#payloadFilter}}<dt>Payload filter</dt><dd><code>{{payloadFilter}}</code></dd>{{/payloadFilter}}
        <dt>Headers</dt><dd>{{#hasHeaders}}<ul class="header-names">{{#headerNames}}<li><code>{{.}}</code></li>{{/headerNames}}</ul>
        <small class="hint">Names only: their values are never shown.</small>{{/hasHeaders}}{{^hasHeaders}}none{{/hasHeaders}}</dd>
        <dt>Queue</dt><dd><a href="/jobs?queue={{queueQuery}}">{{queue}}</a></dd>
        <dt>Rate limit</dt><dd>{{rateLimit}}</dd>
        <dt>Ordered</dt><dd>{{#ordered}}yes: one delivery at a time, in publish order{{/ordered}}{{^ordered}}no{{/ordered}}</dd>
        {{#disabled}}<dt>Disabled</dt><dd>{{disabledAt}}: {{disabledReason}}</dd>{{/disabled}}
        <dt>Created</dt><dd>{{created}}</dd>
        <dt>Changed</dt><dd>{{updated}}</dd>
        <dt>Recent deliveries</dt><dd>{{#recent}}{{ok}} ok, {{dead}} dead, {{waiting}} waiting of the last {{total}}{{/recent}}{{#lastSuccess}}; last success {{lastSuccess}}{{/lastSuccess}}</dd>
        <dt>Health</dt><dd id="health">{{health}}</dd>
        <dt>Disables itself</dt><dd id="auto-disable">{{autoDisable}}</dd>
        </dl>
        <section aria-labelledby="secrets-heading">
        <h2 id="secrets-heading">Signing secrets</h2>
        <p id="secrets">{{validSecrets}} valid: the current one{{#retiringUntil}} and {{retiring}} retiring, signing beside it; the first to stop does at {{retiringUntil}}{{/retiringUntil}}. Secrets are stored sealed and never shown here.</p>
        {{#canRotate}}<form method="post" action="/endpoints/{{id}}/rotate">{{> csrf}}
        <p><button type="submit">Rotate the secret</button> <small class="hint">The new secret is shown once, on the next page; the current one keeps signing for {{graceHours}} hours.</small></p></form>{{/canRotate}}
        {{#rotationNeedsKey}}<p class="hint" id="rotation-needs-key">Rotation is off: this console was started without COURIER_SECRETS_KEY_FILE (or --secrets-key-file), so it cannot seal a new secret.</p>{{/rotationNeedsKey}}
        </section>
        <section aria-labelledby="deliveries-heading">
        <h2 id="deliveries-heading">Newest deliveries</h2>
        {{#hasDeliveries}}<div class="wrap"><table id="deliveries">
        <thead><tr><th scope="col">Job</th><th scope="col">Message</th><th scope="col">State</th><th scope="col" class="n">Attempt</th>
        <th scope="col">Written</th><th scope="col" class="n">Last status</th><th scope="col">Last error</th><th scope="col">Re-send of</th></tr></thead>
        <tbody>
        {{#deliveries}}<tr data-job="{{jobID}}">
        <th scope="row"><a href="/jobs/{{jobID}}">{{jobID}}</a></th>
        <td>{{#messageID}}<a href="/messages/{{messageID}}">{{webhookID}}</a>{{/messageID}}</td>
        <td><span class="state {{state}}">{{state}}</span></td><td class="n">{{attempt}}/{{maxAttempts}}</td>
        <td><time datetime="{{timeISO}}">{{time}}</time></td>
        <td class="n">{{lastStatus}}</td><td class="error">{{lastError}}</td>
        <td>{{#resentFrom}}<a href="/jobs/{{resentFrom}}">job {{resentFrom}}</a>{{/resentFrom}}</td>
        </tr>{{/deliveries}}
        </tbody></table></div>
        <p class="hint">The newest {{deliveriesShown}} at most.</p>{{/hasDeliveries}}
        {{^hasDeliveries}}<p>No delivery yet.</p>{{/hasDeliveries}}
        </section>
        """

    static let rotatedSecret = """
        <h1>New secret for endpoint {{id}}</h1>
        <p class="notice" role="status">Copy it now and give it to the receiver: this is the only time it is shown.
        It is stored sealed; neither this console nor the CLI can show it again.</p>
        <p><label for="new-secret">Secret of <code>{{url}}</code></label></p>
        <p><code class="secret" id="new-secret">{{secret}}</code></p>
        <p>{{#retiringUntil}}The previous secret keeps signing beside it until {{retiringUntil}} ({{graceHours}} hours), so
        the receiver can switch without missing a delivery.{{/retiringUntil}}{{^retiringUntil}}It signs every delivery from now on.{{/retiringUntil}}</p>
        <p><a href="/endpoints/{{id}}">Back to the endpoint</a></p>
        """

    static let webhookMessages = """
        <h1>Messages</h1>
        <form class="filters" method="get" action="/messages">
        <p><label for="f-tenant">Tenant</label><input id="f-tenant" name="tenant" value="{{filterTenant}}"></p>
        <p><label for="f-event-type">Event type</label><input id="f-event-type" name="event_type" value="{{filterEventType}}" placeholder="invoice.paid"></p>
        <p><button type="submit">Filter</button> <a href="/messages">Clear</a></p>
        </form>
        {{#hasMessages}}
        <div class="wrap"><table id="messages">
        <thead><tr><th scope="col">Message</th><th scope="col">webhook-id</th><th scope="col">Event type</th><th scope="col">Tenant</th>
        <th scope="col">Published</th><th scope="col" class="n">Endpoints</th><th scope="col" class="n">Deliveries: ok / dead / waiting</th></tr></thead>
        <tbody>
        {{#messages}}
        <tr data-message="{{id}}">
        <th scope="row"><a href="/messages/{{id}}">{{id}}</a></th>
        <td><code>{{webhookID}}</code></td><td>{{eventType}}</td>
        <td>{{#tenant}}<a href="/messages?tenant={{tenantQuery}}">{{tenant}}</a>{{/tenant}}{{^tenant}}<span class="hint">none</span>{{/tenant}}</td>
        <td><time datetime="{{publishedISO}}">{{published}}</time></td>
        <td class="n">{{endpoints}}</td>
        <td class="n" data-field="deliveries">{{#deliveries}}{{ok}} / {{dead}} / {{waiting}}{{/deliveries}}</td>
        </tr>
        {{/messages}}
        </tbody></table></div>
        <nav class="pages" aria-label="Pages">{{#firstPage}}<a href="{{firstPage}}">Newest</a>{{/firstPage}}
        {{#nextPage}}<a rel="next" href="{{nextPage}}">Older</a>{{/nextPage}}</nav>
        {{/hasMessages}}
        {{^hasMessages}}<p>No message matches.</p>{{/hasMessages}}
        """

    static let webhookMessage = """
        <h1>Message {{messageID}} <code>{{webhookID}}</code></h1>
        <dl class="facts">
        <dt>Event type</dt><dd>{{eventType}}</dd>
        <dt>Tenant</dt><dd>{{#tenant}}<a href="/messages?tenant={{tenantQuery}}">{{tenant}}</a> · <a href="/endpoints?tenant={{tenantQuery}}">its endpoints</a>{{/tenant}}{{^tenant}}none (internal){{/tenant}}</dd>
        <dt>Published</dt><dd><time datetime="{{publishedISO}}">{{published}}</time></dd>
        {{#idempotencyKey}}<dt>Idempotency key</dt><dd>{{idempotencyKey}}</dd>{{/idempotencyKey}}
        <dt>Endpoints matched</dt><dd>{{endpoints}}</dd>
        <dt>Deliveries</dt><dd>{{#counts}}{{ok}} ok, {{dead}} dead, {{waiting}} waiting of {{total}}{{/counts}}</dd>
        </dl>
        <section aria-labelledby="payload-heading">
        <h2 id="payload-heading">Payload <small>({{payloadBytes}} bytes{{#payloadClipped}}, first part shown{{/payloadClipped}})</small></h2>
        <pre class="body" id="payload">{{payload}}</pre>
        </section>
        <section aria-labelledby="deliveries-heading">
        <h2 id="deliveries-heading">Deliveries</h2>
        {{#canResendAll}}<form method="post" action="/messages/{{messageID}}/resend">{{> csrf}}
        <p><button type="submit">Re-send to all</button> <small class="hint">One new delivery per enabled endpoint it went to, with the same webhook-id.</small></p></form>{{/canResendAll}}
        {{#hasDeliveries}}<div class="wrap"><table id="deliveries">
        <thead><tr><th scope="col">Job</th><th scope="col">Endpoint</th><th scope="col">URL</th><th scope="col">State</th>
        <th scope="col" class="n">Attempt</th><th scope="col" class="n">Last status</th><th scope="col">Last error</th><th scope="col">Re-send of</th>
        {{#canResendAll}}<th scope="col">Action</th>{{/canResendAll}}</tr></thead>
        <tbody>
        {{#deliveries}}<tr data-job="{{jobID}}">
        <th scope="row"><a href="/jobs/{{jobID}}">{{jobID}}</a></th>
        <td>{{#endpointID}}<a href="/endpoints/{{endpointID}}">{{endpointID}}</a>{{/endpointID}}</td>
        <td class="url">{{#endpointURL}}{{endpointURL}}{{/endpointURL}}{{^endpointURL}}<span class="hint">endpoint deleted</span>{{/endpointURL}}</td>
        <td><span class="state {{state}}">{{state}}</span></td><td class="n">{{attempt}}/{{maxAttempts}}</td>
        <td class="n">{{lastStatus}}</td><td class="error">{{lastError}}</td>
        <td>{{#resentFrom}}<a href="/jobs/{{resentFrom}}">job {{resentFrom}}</a>{{/resentFrom}}</td>
        {{#canResendAll}}<td>{{#resendEndpoint}}<form method="post" action="/messages/{{messageID}}/resend">{{> csrf}}
        <input type="hidden" name="endpoint" value="{{resendEndpoint}}"><button type="submit">Re-send</button></form>{{/resendEndpoint}}</td>{{/canResendAll}}
        </tr>{{/deliveries}}
        </tbody></table></div>{{/hasDeliveries}}
        {{^hasDeliveries}}<p>No delivery: it matched no endpoint when published.</p>{{/hasDeliveries}}
        </section>
        """

    static let message = """
        <h1>{{heading}}</h1>
        <p>{{text}}</p>
        {{#back}}<p><a href="{{back}}">Back</a></p>{{/back}}
        """
}

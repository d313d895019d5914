# cmake/modules.cmake - the module map: every src/ folder, what it may use, and what it links.
#
# This table is the one copy of DESIGN.md's module map in the repository. CMakeLists.txt builds
# one static library per folder (sq_<folder>) linked only to the folders listed here, and the
# ctest `map.modules` (tests/map/check_map.py) fails when a source file includes a header of a
# folder its own folder may not use, or when a library's object code calls a function that only
# a folder it may not use defines. Arrows point down only: a folder never uses one above it, and
# SQ_MODULES lists the folders bottom up (the test checks that each uses only folders before it).
# docs/internals/map.md repeats the table for readers, one row per folder; the same test fails
# when a row differs from the SQ_USES_ line here.
#
# SQ_USES_<m>: the folders m may use. SQ_EXT_<m>: the outside libraries m links.
set(SQ_MODULES base loop stats proc net http proto server plan script result engine output face
               sink target store mcp cluster daemon cli)

set(SQ_USES_base "")
set(SQ_USES_loop base)
set(SQ_USES_stats base)
set(SQ_USES_proc base)
set(SQ_USES_net loop base)
set(SQ_USES_http base)
set(SQ_USES_proto base)
set(SQ_USES_server http net loop base)
set(SQ_USES_plan stats base)
set(SQ_USES_script plan stats base)
# result/: what a run measured (struct sq_result: counters, histograms, series, per-step, per-bus,
# per-URL and WebSocket figures), merged and disposed, and a plan's threshold verdicts on it
# (result/verdict.h reads the plan's thresholds and metric table: plan/). Below engine/, so the
# readers of results (output, cluster, daemon, mcp, the faces) need nothing of the load path.
set(SQ_USES_result plan stats proc base)
set(SQ_USES_engine result script proto plan http net stats proc loop base)
set(SQ_USES_output result plan stats proc base)
# face/: turning a face's options into a run (quick flags, plan runs, network, distribution and
# watch options, URL lists, a wrk script's states) and the faces' result documents, built with
# output/'s generic builders. Above output/, below every folder that has a face (cli, daemon, mcp).
set(SQ_USES_face output engine result script proto plan http net proc stats base)
set(SQ_USES_target sink server http proto stats loop base)
# sink/: what arrives at the far end of a pipeline. Its HTTP source is server/'s, its NATS and
# MQTT subscriptions speak proto/'s codecs over net/ and loop/, and it finds stamps with plan/'s
# JSON paths and regexes. A folder of its own, below target/: the webhook inbox (target/inbox.c)
# matches stamped captures with sink's ledger (sq_sink_ledger_new), nothing else of target/ uses it.
set(SQ_USES_sink server proto plan http net stats loop base)
set(SQ_USES_store base)
set(SQ_USES_mcp face store engine output result plan target server http net stats base)
# cluster/ holds its own control-plane NATS connection (cluster/ctlbus.c: one blocking socket, no
# event loop), so it uses net/ for resolving and connecting; docs/internals/map.md says why it is
# not in engine/.
set(SQ_USES_cluster engine result proto plan net stats base)
# daemon/ runs a plan's sink: section beside its load (sink/beside.h), as `squall run` does, and
# builds each run's egress policy from its allow_hosts (net/egress.h).
set(SQ_USES_daemon face mcp target store sink engine output result plan server http net stats
                   base)
set(SQ_USES_cli mcp daemon cluster store sink target face output engine result script plan proto
                server http net stats proc loop base)

set(SQ_EXT_base Threads::Threads m)
set(SQ_EXT_stats ZLIB::ZLIB PkgConfig::JANSSON)
# net/ loads OpenSSL itself (net/tls.c; CMakeLists.txt adds its headers).
# http/ loads brotli and zstd itself (http/codecs.c; CMakeLists.txt adds their headers).
set(SQ_EXT_http ZLIB::ZLIB) # and nghttp2, loaded by http/nghttp2lib.c (CMakeLists.txt)
# plan/ loads libfyaml itself (plan/fyaml.c; CMakeLists.txt adds its headers).
set(SQ_EXT_plan PkgConfig::JANSSON) # and PCRE2, loaded by plan/eval.c (CMakeLists.txt)
set(SQ_EXT_output PkgConfig::JANSSON)
set(SQ_EXT_target ZLIB::ZLIB)
set(SQ_EXT_engine PkgConfig::JANSSON)
set(SQ_EXT_face PkgConfig::JANSSON)
set(SQ_EXT_cli PkgConfig::JANSSON)
set(SQ_EXT_sink PkgConfig::JANSSON)
set(SQ_EXT_mcp PkgConfig::JANSSON)
# store/ loads libsqlite3 itself (store/sqlite.c; CMakeLists.txt adds its headers).
set(SQ_EXT_daemon PkgConfig::JANSSON)
# script/ loads LuaJIT itself (script/luajit.c; CMakeLists.txt adds its headers).
# proto/ loads wslay itself (proto/ws.c; CMakeLists.txt adds its headers).
set(SQ_EXT_cluster PkgConfig::JANSSON)

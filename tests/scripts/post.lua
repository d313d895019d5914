-- post.lua - every request is the same form POST.
--
-- Only the wrk table changes, and no request() is defined, so the request is
-- rendered once and sent as it is (the static path).

wrk.method = "POST"
wrk.body = "foo=bar&baz=quux"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"

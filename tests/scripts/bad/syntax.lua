-- bad/syntax.lua - a syntax error on line 4: loading must fail naming file:line.

function request()
   return wrk.format(nil, "/" ..)
end

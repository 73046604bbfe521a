# Writes onnxforge(1) (gzipped) from the command's --help and every subcommand's --help.
#   cmake -DONNXFORGE=build/onnxforge -DOUT=onnxforge.1.gz -DVERSION=0.1.0 -P manpage.cmake
function(run_help out_var)
  execute_process(COMMAND ${ONNXFORGE} ${ARGN} --help OUTPUT_VARIABLE text RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${ONNXFORGE} ${ARGN} --help failed (${rc})")
  endif()
  string(REPLACE "${ONNXFORGE}" "onnxforge" text "${text}")  # "Usage: onnxforge ...", not the build path
  set(${out_var} "${text}" PARENT_SCOPE)
endfunction()

# roff: backslashes escaped, lines starting with . or ' protected.
function(roff_literal out_var text)
  string(REPLACE "\\" "\\e" text "${text}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" text "${text}")
  set(${out_var} ".nf\n${text}\n.fi\n" PARENT_SCOPE)
endfunction()

run_help(top)
# Subcommands: the lines under "Subcommands:" of the top-level help ("  name    description").
string(REGEX REPLACE ".*[Ss][Uu][Bb][Cc][Oo][Mm][Mm][Aa][Nn][Dd][Ss]:\n" "" listing "${top}")
string(REPLACE "\n" ";" lines "${listing}")
set(commands "")
foreach(line IN LISTS lines)
  if(line MATCHES "^  ([a-z][a-z0-9_-]*)  ")
    list(APPEND commands ${CMAKE_MATCH_1})
  endif()
endforeach()
if(NOT commands)
  message(FATAL_ERROR "no subcommands found in ${ONNXFORGE} --help")
endif()

string(TIMESTAMP date "%Y-%m-%d" UTC)  # SOURCE_DATE_EPOCH, when set, makes it reproducible
roff_literal(top_text "${top}")
set(page ".TH ONNXFORGE 1 \"${date}\" \"onnxforge ${VERSION}\" \"User Commands\"
.SH NAME
onnxforge \\- make ONNX models smaller and faster, and prove it did no harm
.SH SYNOPSIS
.B onnxforge
.I COMMAND
[\\fIOPTIONS\\fR]
.SH DESCRIPTION
onnxforge optimizes ONNX models with a library of passes (each with an accuracy class), verifies
the result against the original with its own runtime, and explains what it did. Every command
prints JSON with \\fB--json\\fR. Exit codes: 0 success, 1 the check said no, 2 bad usage or input,
3 internal error.
${top_text}.SH COMMANDS
")
foreach(cmd IN LISTS commands)
  run_help(help ${cmd})
  roff_literal(text "${help}")
  string(APPEND page ".SS ${cmd}\n${text}")
endforeach()
string(APPEND page ".SH SEE ALSO
The Python module: \\fBpython3 -c 'import onnxforge; help(onnxforge)'\\fR.
The C++ API: \\fI/usr/include/onnxforge/onnxforge.h\\fR.
")
get_filename_component(dir ${OUT} DIRECTORY)
file(MAKE_DIRECTORY ${dir})
string(REGEX REPLACE "\\.gz$" "" plain ${OUT})
file(WRITE ${plain} "${page}")
execute_process(COMMAND gzip -9nf ${plain} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gzip ${plain} failed")
endif()

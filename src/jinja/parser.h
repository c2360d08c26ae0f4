// Jinja's grammar over the lexer's tokens (lexer.h), as chat templates use it: {{ expressions }} with Python's
// operators, literals, attribute and index access, slices, calls, filters and tests; {% if/elif/else %},
// {% for ... in ... if ... %} with else, {% set %} (names, tuples, namespace attributes, blocks), {% macro %},
// {% call %}, {% filter %}, {% break %}/{% continue %}, and {% generation %} (Hugging Face's marker: its body is
// rendered as is).
#pragma once

#include <string_view>

#include "jinja/ast.h"

namespace kvs::jinja {

// Throws TemplateError naming the line and what was expected.
Body parse_template(std::string_view source);

}  // namespace kvs::jinja

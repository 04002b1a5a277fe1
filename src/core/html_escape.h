// Escaping text for HTML, as Jinja's `escape` filter (MarkupSafe) does: the chat templates' filter
// and check-invariance's report page share it. Thread-safety: a pure function.
#pragma once

#include <string>
#include <string_view>

namespace ditto {

// `text` with & < > " ' replaced by &amp; &lt; &gt; &#34; &#39; (safe in element text and in
// quoted attribute values).
std::string html_escape(std::string_view text);

}  // namespace ditto

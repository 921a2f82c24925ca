//! The SPDY/3 header compression dictionary (draft 3, section 2.6.10.1): the zlib
//! preset dictionary both directions use for header blocks.

pub(crate) const DICTIONARY: &[u8] =
    b"\0\0\0\x07options\0\0\0\x04head\0\0\0\x04post\0\0\0\x03put\0\0\0\x06delete\0\0\0\x05trace\0\0\0\x06a\
    ccept\0\0\0\x0eaccept-charset\0\0\0\x0faccept-encoding\0\0\0\x0faccept-language\0\0\0\x0daccept-rang\
    es\0\0\0\x03age\0\0\0\x05allow\0\0\0\x0dauthorization\0\0\0\x0dcache-control\0\0\0\x0aconnection\0\0\
    \0\x0ccontent-base\0\0\0\x10content-encoding\0\0\0\x10content-language\0\0\0\x0econtent-length\0\0\0\
    \x10content-location\0\0\0\x0bcontent-md5\0\0\0\x0dcontent-range\0\0\0\x0ccontent-type\0\0\0\x04date\
    \0\0\0\x04etag\0\0\0\x06expect\0\0\0\x07expires\0\0\0\x04from\0\0\0\x04host\0\0\0\x08if-match\0\0\0\x11\
    if-modified-since\0\0\0\x0dif-none-match\0\0\0\x08if-range\0\0\0\x13if-unmodified-since\0\0\0\x0dlas\
    t-modified\0\0\0\x08location\0\0\0\x0cmax-forwards\0\0\0\x06pragma\0\0\0\x12proxy-authenticate\0\0\0\
    \x13proxy-authorization\0\0\0\x05range\0\0\0\x07referer\0\0\0\x0bretry-after\0\0\0\x06server\0\0\0\x02\
    te\0\0\0\x07trailer\0\0\0\x11transfer-encoding\0\0\0\x07upgrade\0\0\0\x0auser-agent\0\0\0\x04vary\0\0\
    \0\x03via\0\0\0\x07warning\0\0\0\x10www-authenticate\0\0\0\x06method\0\0\0\x03get\0\0\0\x06status\0\0\
    \0\x06200 OK\0\0\0\x07version\0\0\0\x08HTTP/1.1\0\0\0\x03url\0\0\0\x06public\0\0\0\x0aset-cookie\0\0\
    \0\x0akeep-alive\0\0\0\x06origin10010120120220520630030230330430530630740240540640740840941041141241\
    3414415416417502504505203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Re\
    quest401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Servi\
    ce UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat\
    , Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text\
    /plain,text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,\
    enq=0.";

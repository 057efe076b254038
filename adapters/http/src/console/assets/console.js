// QueueBox console: refresh the overview in place, and the select-all box of the dead lists.
// No data reaches the page through script except the overview's HTML, which the server escaped.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (live) {
    var source = live.getAttribute("data-src");
    setInterval(function () {
      fetch(source, { credentials: "same-origin", cache: "no-store" })
        .then(function (answer) {
          if (!answer.ok) { throw new Error("status " + answer.status); }
          return answer.text();
        })
        .then(function (html) {
          live.innerHTML = html;
          var stamp = document.getElementById("refreshed");
          if (stamp) { stamp.textContent = new Date().toLocaleTimeString(); }
        })
        .catch(function () {
          var stamp = document.getElementById("refreshed");
          if (stamp) { stamp.textContent = "refresh failed, retrying"; }
        });
    }, 5000);
  }
  var all = document.getElementById("select-all");
  if (all) {
    all.addEventListener("change", function () {
      var boxes = document.querySelectorAll("input[type=checkbox][name=id]");
      for (var i = 0; i < boxes.length; i++) { boxes[i].checked = all.checked; }
    });
  }
})();

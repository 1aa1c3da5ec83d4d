  // Shared by the review pages (included inside each page's own function): who is
  // reviewing, and moving to another case with the name kept in the URL.
  var nameBox = document.getElementById("reviewer");

  function reviewer() { return nameBox.value.trim(); }

  function go(index) {
    if (index === "" || index === undefined) { return; }
    var q = new URLSearchParams(location.search);
    q.set("i", index);
    q.set("r", reviewer());
    location.search = q.toString();
  }

console.log("forsetti");

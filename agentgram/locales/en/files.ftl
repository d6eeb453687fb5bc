# Photos, voice notes and files (README "Attachments, voice and send_file")

# what was heard in a voice note, as a reply to it, so the user can check it
voice-transcript = 🎙 “{ $text }”
voice-failed = 🎙 I couldn't transcribe your voice note: { $reason }. The recording is saved in my working folder, so nothing is lost.
attachment-failed = 📎 I couldn't fetch “{ $name }”: { $reason }.
file-too-large = 📎 I can't fetch this { $file }: it is over { $limit } MB, the most a bot may download from Telegram. Send it in smaller parts, or put it somewhere I can reach.
file-kind = { $kind ->
    [photo] photo
    [voice] voice note
    [audio] audio file
    [video_note] video note
    [video] video
    [animation] animation
   *[other] file
}
file-send-failed = 📎 I couldn't send “{ $name }”: { $reason }.
file-send-missing = the file is no longer there
sticker-reply = { $emoji } Nice one! I can't read stickers, though — tell me in words (or a voice note) what you need.
